"""[000] Sec. 4.2 / Table 2: the Stanford bunny as an implicit surface f^-1(1).

Three Laplacian-kernel CVRs (each fitting the residual of the previous, smaller sigma), marching cubes
over a narrow band of the grid, the mesh saved as binary PLY and rendered to PNG.  The fit runs in a
fresh process (:func:`reports.common.measure_fit`); the per-level #CVs, #SVs and times are the
columns of Table 2.

Data: the Stanford bunny scan shipped by the ``pymeshfix`` package (``examples/StanfordBunny.ply``,
50,000 vertices; only the data file is read).  The paper used the 35,947-point original scan from
the Stanford repository via the Georgia Tech large-models page.

Modes: tiny = 2,000 random points and a 40-cell grid (the test suite); quick = 20,000 random points
and a 128-cell grid (all 50,000 take 8.6 s of CPU time since the levels use the papers' loop, solver='smo';
149-165 s, most of it level 3, while they took CVR's default solver='auto');
full = all 50,000 points, 192 cells, which gives the Table 2 row and its target (the fit in <= 60 s).
"""
from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd

from . import paper, style
from .common import Context, ExperimentResult, FitJob, experiment, measure_fit, to_markdown

#: (number of points, grid resolution) per mode; None = all points
SIZES = {"tiny": [(2000, 40)], "quick": [(20_000, 128)], "full": [(None, 192)]}
SEED = 0
#: (Table 2 of the paper, Stanford bunny, 35,947 points, 3.2 GHz Pentium 4: reports/paper_values.csv)
FIT_TARGET_S = 60.0


def _prepare(n_points, seed, out_dir, resolution):
    from refimpl.mesh_io import load_bunny
    pts = load_bunny()
    if n_points is not None and n_points < len(pts):
        pts = pts[np.random.default_rng(seed).choice(len(pts), n_points, replace=False)]
    return pts, seed, out_dir, resolution


def _fit(data):
    from corevector.surface import ImplicitSurface
    pts, seed, _, _ = data
    return ImplicitSurface(random_state=seed).fit(pts)


def _evaluate(model, data):
    from pathlib import Path

    from refimpl.isosurface import boundary_edge_count, connected_components
    from refimpl.mesh_io import write_mesh
    from refimpl.render import render
    pts, _, out_dir, resolution = data
    out = Path(out_dir)
    verts, faces = model.mesh(resolution=resolution)
    info = dict(model.mesh_info_)
    t0 = time.perf_counter()
    write_mesh(out / "surface_bunny.ply", verts, faces, binary=True)
    write_time = time.perf_counter() - t0
    t0 = time.perf_counter()
    render(out / "surface_bunny.png", verts, faces, views=((10, -70), (10, 20), (60, -110)),
             title=f"CVR implicit surface of the Stanford bunny: {len(pts):,} points, "
                   f"{model.n_support_vectors_:,} SVs, {len(faces):,} triangles")
    render_time = time.perf_counter() - t0
    # distances from the mesh to the input points and back, in units of the bounding-box diagonal
    from scipy.spatial import cKDTree
    diag = float(np.linalg.norm(np.ptp(pts, axis=0)))
    d_mesh = cKDTree(pts).query(verts)[0] / diag if len(verts) else np.array([np.nan])
    d_pts = cKDTree(verts).query(pts)[0] / diag if len(verts) else np.array([np.nan])
    f_pts = model.decision_function(pts)
    return dict(levels=model.summary(), n_points=len(pts), n_vertices=len(verts), n_faces=len(faces),
                boundary_edges=boundary_edge_count(faces),
                components=int(len(np.unique(connected_components(len(verts), faces)))) if len(faces) else 0,
                grid_time=info["grid_time"], marching_cubes_time=info["marching_cubes_time"],
                nodes_evaluated=info["nodes_evaluated"], grid_nodes=info["grid_nodes"],
                resolution=info["resolution"], write_time=write_time, render_time=render_time,
                mesh_to_points_median=float(np.median(d_mesh)), mesh_to_points_p99=float(np.quantile(d_mesh, 0.99)),
                points_to_mesh_median=float(np.median(d_pts)), points_to_mesh_p99=float(np.quantile(d_pts, 0.99)),
                f_minus_1_on_points_max=float(np.max(np.abs(f_pts))))


JOB = FitJob(_prepare, _fit, _evaluate)


@experiment("surface", "Implicit surface of the Stanford bunny (000 Sec. 4.2, Table 2)", sizes=SIZES)
def run(ctx: Context) -> ExperimentResult:
    from refimpl.surface import DEFAULT_C, DEFAULT_MU, DEFAULT_SIGMAS
    n_points, resolution = ctx.sizes[0]
    load0 = os.getloadavg()[0]
    res = measure_fit(JOB, n_points, ctx.seed or SEED, str(ctx.out), resolution, trace_memory=False)
    load = (load0, os.getloadavg()[0])
    if "error" in res:
        raise RuntimeError(f"surface experiment failed: {res['error']}")
    levels = res.pop("levels")
    df = pd.DataFrame(levels)
    df.insert(0, "n_points", res["n_points"])
    df.to_csv(ctx.out / "surface.csv", index=False)
    lv = df[df["level"] != "total"]
    n_cv, n_sv = int(lv["n_cv"].sum()), int(lv["n_sv"].sum())
    scale = f"ours: {res['n_points']:,} points of the 50,000-vertex bunny"
    test_time = res["grid_time"] + res["marching_cubes_time"] + res["render_time"]
    table2 = paper.comparison([
        paper.row("000", "Sec. 4.2", "Stanford bunny", "points", res["n_points"]),
        paper.row("000", "Table 2", "Stanford bunny", "#CVs", n_cv, note=scale),
        paper.row("000", "Table 2", "Stanford bunny", "#SVs", n_sv, note=scale),
        paper.row("000", "Table 2", "Stanford bunny", "CPU time (s)", res["fit_cpu_time"],
                  note=f"ours: CPU seconds of all threads on {os.cpu_count()} CPUs, wall {res['fit_time']:.3g} s"),
        paper.row("000", "Sec. 4.2", "Stanford bunny", "rendering time (s)", test_time,
                  note=f"ours: the grid's evaluation, marching cubes ({res['resolution']} cells) and the PNG "
                       "render, wall seconds"),
    ])
    table2.to_csv(ctx.out / "surface_paper.csv", index=False)
    full_scale = res["n_points"] >= paper.value("000", "Sec. 4.2", "Stanford bunny", "points")
    headline = [dict(claim="000 Table 2: the three-level CVR of the Stanford bunny (35,947 points) in 265.8 s CPU, "
                           "4,560 SVs: implicit surfaces in minutes instead of hours",
                     ours=f"{res['fit_cpu_time']:.3g} s CPU, {n_sv:,} SVs, {n_cv:,} CVs on {res['n_points']:,} points",
                     holds=(bool(res["fit_cpu_time"] <= paper.value("000", "Table 2", "Stanford bunny", "CPU time (s)"))
                            if full_scale else None))]
    per_level = lv[["level", "sigma", "sigma_abs", "C", "mu", "target_rms", "n_cv", "n_sv", "fit_time", "cpu_time",
                    "epsilon_bar", "certified_ratio", "residual_rms_after"]].rename(columns={
        "sigma": "σ / diag", "sigma_abs": "σ (scan units)", "target_rms": "target RMS", "n_cv": "#CVs",
        "n_sv": "#SVs", "fit_time": "wall (s)", "cpu_time": "CPU (s)", "epsilon_bar": "ε̄ (scaled)",
        "certified_ratio": "cert. ratio", "residual_rms_after": "RMS(1 - f) after"})
    mesh = pd.DataFrame([dict(**{"grid": f"{res['resolution']} cells", "nodes evaluated":
                                 f"{res['nodes_evaluated']:,} of {res['grid_nodes']:,}",
                                 "grid eval (s)": res["grid_time"], "marching cubes (s)": res["marching_cubes_time"],
                                 "render (s)": res["render_time"], "vertices": res["n_vertices"],
                                 "faces": res["n_faces"], "boundary edges": res["boundary_edges"],
                                 "components": res["components"]})])
    acc = (f"Mesh vs. points (fractions of the bounding-box diagonal): median / 99th percentile distance "
           f"from a mesh vertex to the nearest point {res['mesh_to_points_median']:.2e} / "
           f"{res['mesh_to_points_p99']:.2e}; from a point to the nearest mesh vertex "
           f"{res['points_to_mesh_median']:.2e} / {res['points_to_mesh_p99']:.2e}; max |f - 1| on the points "
           f"{res['f_minus_1_on_points_max']:.2e}.")
    target = ""
    if res["n_points"] >= 50_000:
        # Table 2 reports CPU time; the wall clock is given too, with the machine's load, since the
        # cores may be shared with other jobs
        ok_cpu, ok_wall = res["fit_cpu_time"] <= FIT_TARGET_S, res["fit_time"] <= FIT_TARGET_S
        target = (f"\n\nTarget: the three-level fit on the 50,000-point bunny in <= {FIT_TARGET_S:g} s "
                  f"(Table 2 measures CPU time): CPU time {res['fit_cpu_time']:.1f} s "
                  f"(**{'met' if ok_cpu else 'NOT met'}**); wall clock {res['fit_time']:.1f} s "
                  f"({'within' if ok_wall else 'over'} {FIT_TARGET_S:g} s) with the 1-minute load average "
                  f"at {load[0]:.1f} before / {load[1]:.1f} after the run on {os.cpu_count()} CPUs.")
    params = (f"σ = {tuple(DEFAULT_SIGMAS)} × bounding-box diagonal, C = {tuple(DEFAULT_C)}, "
              f"μ = {DEFAULT_MU:g}, eps = 1e-6 with the paper's (1+eps)-ball stop rule (stop='radius'), "
              f"59 random candidates per iteration, seed {ctx.seed or SEED}.")
    summary = ("Table 2 (Stanford bunny), the paper's values beside ours:\n\n" + paper.markdown(table2) +
               "\n\nPer level:\n\n" + to_markdown(per_level, floatfmt=".4g") +
               "\n\nMesh (marching cubes on f - 1, narrow band):\n\n" + to_markdown(mesh, floatfmt=".3g") +
               "\n\n" + acc + target + "\n\n" + params +
               "\n\n![bunny](surface_bunny.png)")
    with open(ctx.out / "surface.md", "w") as f:
        f.write("# Implicit surface of the Stanford bunny (000 Sec. 4.2, Table 2)\n\n"
                "Data: `examples/StanfordBunny.ply` of the pymeshfix package (50,000 vertices of the Stanford "
                "bunny; the paper used the 35,947-point scan). CPU time = process CPU seconds of the fit over "
                "all threads (the paper's machine had one core); wall = elapsed.\n\n" + summary + "\n")
    figures = style.wrap_raster(ctx.out / "surface_bunny.png")
    return ExperimentResult(outputs=["surface.csv", "surface_paper.csv", "surface.md", "surface_bunny.ply", *figures],
                            summary_md=summary, headline=headline)
