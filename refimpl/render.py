"""A triangle mesh as a PNG: flat Lambert shading in painter's order, one panel a view.

Matplotlib 2-D polygons sorted back to front (no mplot3d).  The figure is built with the
object-oriented API (``matplotlib.figure.Figure`` on an Agg canvas), so rendering neither needs nor
changes the caller's pyplot backend, and no pyplot figure is left open.
"""
from __future__ import annotations

import numpy as np

#: world axis drawn upwards -> permutation of the coordinates that puts it on z
_UP = {"z": [0, 1, 2], "y": [2, 0, 1], "x": [1, 2, 0]}
#: direction of the light (world coordinates after the ``up`` permutation; normalised)
_LIGHT = np.array([0.4, -0.8, 0.6]) / np.linalg.norm([0.4, -0.8, 0.6])


def _rotation(elev_deg, azim_deg):
    """Camera rotation: world z up; view from azimuth ``azim`` (about z) and elevation ``elev``."""
    a, e = np.radians(azim_deg), np.radians(elev_deg)
    rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    # camera looks along -y' after rotation: screen x = x', screen y = z', depth = y'
    rx = np.array([[1, 0, 0], [0, np.cos(e), -np.sin(e)], [0, np.sin(e), np.cos(e)]])
    return rx @ rz


def render(path, verts, faces, views=((15, -60), (15, 30)), up="z", size=5.0, title=None, points=None):
    """PNG of the mesh from the given (elevation, azimuth) views: flat Lambert shading, painter's order.

    One panel a view; ``up`` is the world axis drawn upwards.  ``points`` (optional) are shown in an
    extra panel as a depth-shaded scatter.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    verts = np.asarray(verts, dtype=np.float64)
    faces = np.asarray(faces)
    perm = _UP[up]
    V = verts[:, perm]
    centre = (V.min(0) + V.max(0)) / 2 if len(V) else np.zeros(3)
    V = V - centre
    panels = len(views) + (points is not None)
    fig = Figure(figsize=(size * panels, size))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, panels, squeeze=False)
    for ax, (elev, azim) in zip(axes[0], views):
        _draw_view(ax, V @ _rotation(elev, azim).T, faces)
        ax.set_title(f"elev {elev}°, azim {azim}°", fontsize=9)
    if points is not None:
        lim = 0.55 * float(np.ptp(V, axis=0).max()) if len(V) else 1.0
        _draw_points(axes[0][-1], (np.asarray(points)[:, perm] - centre) @ _rotation(*views[0]).T, lim)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _draw_view(ax, P, faces):
    """The mesh with projected vertices P (screen x = P0, depth = P1 away from the viewer, screen y = P2)."""
    from matplotlib import colormaps
    from matplotlib.collections import PolyCollection

    if len(faces):
        tri = P[faces]
        nrm = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        nrm /= np.maximum(np.linalg.norm(nrm, axis=1, keepdims=True), 1e-300)
        # faces are oriented outwards; two-sided lighting keeps inner sheets visible if any
        shade = 0.15 + 0.85 * np.abs(nrm @ _LIGHT)
        order = np.argsort(-tri[:, :, 1].mean(1))  # far first
        polys = tri[order][:, :, [0, 2]]
        col = colormaps["bone"](0.25 + 0.7 * shade[order])
        ax.add_collection(PolyCollection(polys, facecolors=col, edgecolors="none", antialiased=False))
    if len(P):  # frame each view on its own projection
        (x0, y0), (x1, y1) = P[:, [0, 2]].min(0), P[:, [0, 2]].max(0)
        half = 0.52 * max(x1 - x0, y1 - y0)
        ax.set_xlim((x0 + x1) / 2 - half, (x0 + x1) / 2 + half)
        ax.set_ylim((y0 + y1) / 2 - half, (y0 + y1) / 2 + half)
    ax.set_aspect("equal")
    ax.axis("off")


def _draw_points(ax, Pp, lim):
    """The input points, projected (as in :func:`_draw_view`), far first, coloured by depth."""
    o = np.argsort(-Pp[:, 1])
    ax.scatter(Pp[o, 0], Pp[o, 2], s=0.2, c=-Pp[o, 1], cmap="viridis", linewidths=0)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"input points ({len(Pp):,})", fontsize=9)
