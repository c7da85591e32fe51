"""Interchange (issue 26): LIBSVM model files that LIBSVM itself predicts with (libsvm-official's svm_predict,
decision values within 1e-9), scikit-learn SVMs with the same decision function (1e-10), and through them
an ONNX export run by onnxruntime (1e-5, float32) and a skops round trip."""
import numpy as np
import pytest
import scipy.sparse as sp

from corevector import CVDD, CVR, MEB, CVMClassifier, load_libsvm_model, load_model, save_libsvm_model, save_model
from corevector.io.libsvm import LibsvmModelError

_RNG = np.random.default_rng(3)
_X = _RNG.normal(size=(160, 3))
_Y2 = np.where(_X[:, 0] + 0.3 * _RNG.normal(size=160) > 0, 1, -1)
_Y4 = (_X[:, 0] > 0).astype(int) + 2 * (_X[:, 1] > 0) + 5   # labels 5..8
_XT = _RNG.normal(size=(60, 3))

CASES = {
    "binary-rbf": (lambda: CVMClassifier(C=10), _Y2),
    "ovo-rbf-proba": (lambda: CVMClassifier(C=10, probability=True), _Y4),
    "ovo-poly": (lambda: CVMClassifier(kernel="poly", gamma=0.5, coef0=1.0, degree=2), _Y4),
    "binary-linear": (lambda: CVMClassifier(kernel="linear"), _Y2),  # gamma='scale': LIBSVM's poly of degree 1
    "binary-linear-gamma1": (lambda: CVMClassifier(kernel="linear", gamma=1.0), _Y2),  # LIBSVM's linear x'y
    "cvdd": (lambda: CVDD(C=5), None),
    "meb-rbf": (lambda: MEB(), None),
    "cvr": (lambda: CVR(C=10), np.sin(_X[:, 0]) + 0.5 * _X[:, 1]),
}


def _fit(name, impl="fast"):
    make, y = CASES[name]
    est = make().set_params(impl=impl, random_state=0)
    return est.fit(_X) if y is None else est.fit(_X, y)


def _decision_values(est, X):
    """Our decision values in LIBSVM's terms: per pair for a classifier, else one column."""
    if isinstance(est, CVMClassifier):
        return est._pair_decisions(X)
    if isinstance(est, CVR):
        return est.predict(X)[:, None]
    if type(est) is MEB:  # the export's rho carries the slack of MEB.predict (agreement at 0)
        return (est.decision_function(X) + MEB.MEMBERSHIP_RTOL * est.certified_radius_ ** 2)[:, None]
    return est.decision_function(X)[:, None]


def _clear_vote(dec, k):
    """The rows where LIBSVM's one-vs-one vote (pairs (i, j), i < j, in its label order) has one winner."""
    votes = np.zeros((len(dec), k))
    p = 0
    for a in range(k):
        for b in range(a + 1, k):
            votes[:, a] += dec[:, p] > 0
            votes[:, b] += dec[:, p] <= 0
            p += 1
    return (votes == votes.max(1, keepdims=True)).sum(1) == 1


def test_linear_kernel_of_a_data_width_is_libsvms_polynomial_of_degree_1(tmp_path):
    """LIBSVM's linear kernel is x'y, without gamma: gamma x'y (gamma='scale') is written as its polynomial kernel
    of degree 1 and coef0 0, and gamma=1.0 as its linear kernel."""
    for name, kernel_type in (("binary-linear", "polynomial"), ("binary-linear-gamma1", "linear")):
        est = _fit(name)
        save_libsvm_model(est, tmp_path / "m.txt")
        head = dict(line.split(" ", 1) for line in (tmp_path / "m.txt").read_text().splitlines()[:5])
        assert head["kernel_type"] == kernel_type
        if kernel_type == "polynomial":
            assert float(head["gamma"]) == est.kernel_spec_.gamma != 1.0
            assert int(head["degree"]) == 1 and float(head["coef0"]) == 0.0


@pytest.mark.parametrize("name", list(CASES))
def test_libsvm_predicts_what_we_predict(tmp_path, name):
    from libsvm.svmutil import svm_load_model, svm_predict

    est = _fit(name, "fast" if name != "ovo-poly" else "ref")
    path = tmp_path / "model.txt"
    save_libsvm_model(est, path)
    model = svm_load_model(str(path))
    assert model is not None
    labels, _, dec = svm_predict([0] * len(_XT), sp.csr_matrix(_XT), model, "-q")
    np.testing.assert_allclose(np.array(dec), _decision_values(est, _XT), rtol=0, atol=1e-9)
    if isinstance(est, CVMClassifier):
        # LIBSVM's vote; a tie goes to the first class there, to the larger confidence here (scikit-learn's ovr
        # decision function): labels agree wherever the vote has one winner
        clear = _clear_vote(np.array(dec), len(est.classes_))
        assert clear.mean() > 0.8
        assert np.array_equal(np.array(labels)[clear], est.predict(_XT)[clear].astype(float))
    elif not isinstance(est, CVR):
        assert np.array_equal(np.array(labels), est.predict(_XT).astype(float))
    # read back by corevector: the same decision values (the text holds every digit)
    back = load_libsvm_model(path)
    assert type(back) is type(est) if not isinstance(est, MEB) or isinstance(est, CVDD) else type(back) is CVDD
    np.testing.assert_allclose(_decision_values(back, _XT), _decision_values(est, _XT), rtol=0, atol=1e-12)
    assert back.n_features_in_ == est.n_features_in_
    if name == "ovo-rbf-proba":
        np.testing.assert_allclose(back.predict_proba(_XT), est.predict_proba(_XT), rtol=0, atol=1e-12)
        # LIBSVM's own probabilities: the same pairwise sigmoids, coupled iteratively (ours: solved directly)
        _, _, prob = svm_predict([0] * len(_XT), sp.csr_matrix(_XT), svm_load_model(str(path)), "-q -b 1")
        np.testing.assert_allclose(np.array(prob), est.predict_proba(_XT), atol=5e-3)


def _libsvm_text(svm_type, labels, n_sv, seed, prob=False):
    """A LIBSVM model file as LIBSVM writes one (its keys and order, SVs with %.8g), with random coefficients
    (any coefficients make a valid model to predict with) and labels in the given, unsorted, order.
    (libsvm-official 3.37's Python binding crashes freeing a model it trained here, so the test writes the
    files LIBSVM would, and LIBSVM's svm_predict is the judge.)"""
    rng = np.random.default_rng(seed)
    k = len(labels) if labels else 2
    l = int(sum(n_sv)) if n_sv else 7
    lines = [f"svm_type {svm_type}", "kernel_type rbf", "gamma 0.69999999999999996", f"nr_class {k}",
             f"total_sv {l}", "rho " + " ".join("%.17g" % v for v in rng.normal(size=k * (k - 1) // 2))]
    if labels:
        lines.append("label " + " ".join(map(str, labels)))
    if prob:
        lines += ["probA " + " ".join("%.17g" % v for v in -1 - rng.random(k * (k - 1) // 2)),
                  "probB " + " ".join("%.17g" % v for v in rng.normal(size=k * (k - 1) // 2) / 10)]
    if n_sv:
        lines.append("nr_sv " + " ".join(map(str, n_sv)))
    lines.append("SV")
    for _ in range(l):
        coef = " ".join("%.17g" % v for v in rng.normal(size=k - 1))
        lines.append(coef + " " + " ".join("%d:%.8g" % (j + 1, v) for j, v in enumerate(rng.normal(size=3)) if v > -1))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("svm_type, labels, n_sv, prob", [
    ("c_svc", [7, 2, 5], [2, 3, 2], True), ("nu_svc", [1, -1], [3, 4], True), ("c_svc", [3, 1, 2, 0], [2, 1, 2, 2], False),
    ("one_class", None, None, False), ("epsilon_svr", None, None, False), ("nu_svr", None, None, False)])
def test_libsvm_files_as_libsvm_writes_them_are_read(tmp_path, svm_type, labels, n_sv, prob):
    """LIBSVM's own files: labels in order of appearance (not sorted), nu-SVC/nu-SVR, %.8g support vectors;
    corevector predicts what LIBSVM's svm_predict predicts from the same file."""
    from libsvm.svmutil import svm_load_model, svm_predict

    path = tmp_path / "libsvm.model"
    path.write_text(_libsvm_text(svm_type, labels, n_sv, seed=len(svm_type) + len(labels or []), prob=prob))
    est = load_libsvm_model(path)
    save_model(est, tmp_path / "imported.cvm")  # an imported model is a model like any other
    again = load_model(tmp_path / "imported.cvm")
    f = "predict" if "svr" in svm_type else "decision_function"
    assert np.array_equal(getattr(again, f)(_XT), getattr(est, f)(_XT))
    model = svm_load_model(str(path))
    lab, _, dec = svm_predict([0] * len(_XT), sp.csr_matrix(_XT), model, "-q")
    dec = np.array(dec)
    if labels:
        assert list(est.classes_) == sorted(labels)
        clear = _clear_vote(dec, len(labels))
        assert clear.mean() > 0.6
        assert np.array_equal(est.predict(_XT)[clear].astype(float), np.array(lab)[clear])
        if prob:
            _, _, p = svm_predict([0] * len(_XT), sp.csr_matrix(_XT), model, "-q -b 1")
            order = np.argsort(model.get_labels())  # LIBSVM's columns follow its label order
            np.testing.assert_allclose(est.predict_proba(_XT), np.array(p)[:, order],
                                       atol=1e-12 if len(labels) == 2 else 5e-3)
    else:
        ours = est.predict(_XT) if "svr" in svm_type else est.decision_function(_XT)
        np.testing.assert_allclose(ours, dec[:, 0], rtol=0, atol=1e-9)
        if svm_type == "one_class":
            assert np.array_equal(est.predict(_XT).astype(float), np.array(lab))


@pytest.mark.parametrize("est, message", [
    (lambda: CVMClassifier(kernel="laplacian").fit(_X, _Y2), "kernel='laplacian' has no LIBSVM"),
    (lambda: CVMClassifier(kernel="poly", normalize=True).fit(_X, _Y2), "normalize=True"),
    (lambda: MEB(kernel="linear").fit(_X), "k\\(x, x\\)"),
    (lambda: CVMClassifier().fit(_X, np.array(["a", "b"])[(_Y2 > 0).astype(int)]), "integer class labels"),
])
def test_what_libsvm_cannot_express_is_refused(tmp_path, est, message):
    with pytest.raises(ValueError, match=message):
        save_libsvm_model(est(), tmp_path / "m.txt")
    assert not (tmp_path / "m.txt").exists()


@pytest.mark.parametrize("text, message", [
    ("svm_type c_svc\nkernel_type sigmoid\nSV\n", "line 2: kernel_type must be one of"),
    ("svm_type c_svc\nkernel_type rbf\ngamma 1\nnr_class 2\ntotal_sv 1\nrho 0\nlabel 1 -1\nnr_sv 1 0\nSV\n",
     "0 support vectors where total_sv is 1"),
    ("svm_type c_svc\nkernel_type rbf\ngamma 1\nnr_class 2\ntotal_sv 1\nrho 0\nlabel 1 -1\nnr_sv 1 0\nSV\n"
     "0.5 3:1 2:1\n", "line 10: feature indices must increase"),
    ("svm_type c_svc\nkernel_type rbf\ngamma 1\nnr_class 99999999\ntotal_sv 0\nSV\n",
     "line 4: nr_class 99999999 out of range"),
    ("svm_type one_class\nkernel_type rbf\ngamma nan\nSV\n", "line 3: non-finite gamma"),
    ("hello\n", "no 'SV' line"),
])
def test_malformed_libsvm_model_files_name_the_line(tmp_path, text, message):
    path = tmp_path / "m.txt"
    path.write_text(text)
    with pytest.raises(LibsvmModelError) as exc:
        load_libsvm_model(path)
    assert message in str(exc.value) and str(path) in str(exc.value) and "\n" not in str(exc.value)


# ------------------------------------------------------------------------------------------------ scikit-learn
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_to_sklearn_has_the_same_decision_function(name, impl):
    from sklearn.svm import SVC, SVR, OneClassSVM

    est = _fit(name, impl)
    sk = est.to_sklearn()
    kind = {CVMClassifier: SVC, CVDD: OneClassSVM, MEB: OneClassSVM, CVR: SVR}[type(est)]
    assert type(sk) is kind
    f = "predict" if isinstance(est, CVR) else "decision_function"
    ours = _decision_values(est, _XT)[:, 0] if type(est) is MEB else getattr(est, f)(_XT)
    np.testing.assert_allclose(getattr(sk, f)(_XT), ours, rtol=0, atol=1e-10)
    if not isinstance(est, CVR):  # scikit-learn's predict votes as LIBSVM: ties go to the first class
        clear = _clear_vote(est._pair_decisions(_XT), len(est.classes_)) if isinstance(est, CVMClassifier) \
            else np.ones(len(_XT), bool)
        assert clear.mean() > 0.8 and np.array_equal(sk.predict(_XT)[clear], est.predict(_XT)[clear])
    # sparse input goes through scikit-learn's sparse LIBSVM path with the same values
    if isinstance(est, CVMClassifier):
        np.testing.assert_allclose(sk.decision_function(_XT), est.decision_function(sp.csr_matrix(_XT)), atol=1e-10)


@pytest.mark.filterwarnings("ignore:Attribute `prob:FutureWarning")  # skl2onnx reads SVC.probA_ (deprecated 1.9)
@pytest.mark.parametrize("name", ["binary-rbf", "ovo-poly", "cvdd", "meb-rbf", "cvr"])
def test_onnx_export_matches_within_1e_5(name):
    """skl2onnx converts to_sklearn()'s model; onnxruntime runs it in float32."""
    import onnxruntime as ort
    from skl2onnx import to_onnx

    est = _fit(name)
    sk = est.to_sklearn()
    onx = to_onnx(sk, _X[:1].astype(np.float32), target_opset=17)
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    X32 = _XT.astype(np.float32)
    outs = sess.run(None, {sess.get_inputs()[0].name: X32})
    Xr = X32.astype(np.float64)  # ours on the same (float32-rounded) inputs
    if isinstance(est, CVR):
        np.testing.assert_allclose(outs[0].ravel(), est.predict(Xr), rtol=1e-5, atol=1e-5)
        return
    scores = np.asarray(outs[1], dtype=np.float64)
    dec = est.decision_function(Xr)
    if isinstance(est, CVMClassifier) and len(est.classes_) == 2:
        scores = scores[:, 0]  # skl2onnx's binary SVC scores are [f(x), -f(x)]
    np.testing.assert_allclose(scores.reshape(dec.shape), dec, rtol=1e-5, atol=1e-5)
    assert np.array_equal(np.asarray(outs[0]).ravel(), est.predict(Xr))


@pytest.mark.parametrize("name", ["ovo-rbf-proba", "cvdd", "cvr"])
def test_skops_round_trip(name):
    import skops.io as sio

    sk = _fit(name).to_sklearn()
    data = sio.dumps(sk)
    assert sio.get_untrusted_types(data=data) == []  # scikit-learn's SVMs are trusted as they are
    back = sio.loads(data)
    f = "predict" if name == "cvr" else "decision_function"
    assert np.array_equal(getattr(back, f)(_XT), getattr(sk, f)(_XT))


# ------------------------------------------------------------------------------------------------ issue 44
@pytest.mark.parametrize("name", list(CASES))
def test_to_sklearn_of_a_sparse_fit_predicts_on_sparse_input(name):
    """A model fitted on CSR rows exports a sparse scikit-learn SVM: SVC().fit on CSR takes CSR (and dense) input
    at predict, and so does the export (it raised "cannot use sparse input in 'SVC' trained on dense data")."""
    make, y = CASES[name]
    Xs = sp.csr_matrix(_X)
    est = make().set_params(random_state=0)
    est = est.fit(Xs) if y is None else est.fit(Xs, y)
    sk = est.to_sklearn()
    assert sk._sparse
    for XT in (sp.csr_matrix(_XT), _XT):
        f = "predict" if isinstance(est, CVR) else "decision_function"
        ours = _decision_values(est, XT)[:, 0] if type(est) is MEB else getattr(est, f)(XT)
        np.testing.assert_allclose(getattr(sk, f)(XT), ours, rtol=0, atol=1e-10)
        if not isinstance(est, CVR):
            clear = _clear_vote(est._pair_decisions(_XT), len(est.classes_)) if isinstance(est, CVMClassifier) \
                else np.ones(len(_XT), bool)
            assert np.array_equal(sk.predict(XT)[clear], est.predict(XT)[clear])
    # a dense fit stays a dense SVM, as SVC's
    dense = make().set_params(random_state=0)
    assert not (dense.fit(_X) if y is None else dense.fit(_X, y)).to_sklearn()._sparse


@pytest.mark.parametrize("impl", ["fast", "ref"])
@pytest.mark.parametrize("scaled", [False, True])
def test_meb_and_its_export_agree_at_decision_zero(impl, scaled):
    """MEB.predict is +1 where decision_function + MEMBERSHIP_RTOL r^2 > 0; LIBSVM's one-class rule (+1 where the
    decision value is positive) on the export, whose rho carries that slack, gives the same labels on every
    breast-cancer point, where 3-7 of the 569 (decision values within 1e-15 of 0, some exactly 0) differed."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X = load_breast_cancer(return_X_y=True)[0]
    X = StandardScaler().fit_transform(X) if scaled else X
    for est in (MEB(impl=impl, random_state=0).fit(X), CVDD(impl=impl, random_state=0).fit(X)):
        sk = est.to_sklearn()
        assert np.array_equal(sk.predict(X), est.predict(X))
        assert np.all(est.predict(X) == 1) or type(est) is CVDD  # the ball holds every training point
    # at exactly 0, both conventions: MEB's slackened value and CVDD's raw value, > 0 is +1
    meb = MEB(impl=impl, random_state=0).fit(X)
    slack = MEB.MEMBERSHIP_RTOL * meb.certified_radius_ ** 2
    for dec, want in ((-slack, -1), (-slack + 1e-13 * slack, 1), (0.0, 1)):
        assert np.where(dec + slack > 0, 1, -1) == want
