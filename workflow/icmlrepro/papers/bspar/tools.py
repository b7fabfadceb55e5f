"""The edit tools, the action table, image features, the perceptual judge's distance and the dense proxy.

Images are float tensors (B, 3, H, W) in [0, 1]. Colour spaces and image operations are kornia's
(``rgb_to_lab``, ``adjust_contrast_with_mean_subtraction``, ``adjust_gamma``, ``adjust_saturation``,
``sharpness``, ``laplacian``); the perceptual distance is scikit-image's CIEDE2000 and SSIM. Every tool takes a
per-image signed amount (0 leaves the image unchanged), so one batch can apply a different edit to each image.
``shadows`` is the local tool: an exposure change weighted by a soft mask of the dark regions (L* < 40).
"""

from __future__ import annotations

import numpy as np
import torch

TOOLS = ("exposure", "contrast", "gamma", "saturation", "temperature", "sharpen", "shadows")
# (small, big) step of each tool in its own unit: stops, contrast factor - 1, log2 gamma, saturation factor - 1,
# b* shift (CIELAB units), sharpness factor - 1, stops in the shadows
STEPS = {"exposure": (0.12, 0.35), "contrast": (0.1, 0.3), "gamma": (0.12, 0.35), "saturation": (0.12, 0.4),
         "temperature": (2.5, 7.0), "sharpen": (0.4, 1.2), "shadows": (0.2, 0.6)}
SIGNS = (-1, -1, 1, 1)
SIZES = (1, 0, 0, 1)  # index into STEPS: -big, -small, +small, +big
STOP = 0
N_ACTIONS = 1 + 4 * len(TOOLS)
JND = 2.0  # mean CIEDE2000 below which an edit counts as perceptually negligible (= the default judge threshold)


def action_table() -> list[tuple[str, float]]:
    """Action index -> (tool, signed amount); index 0 is ``stop`` (tool '', amount 0)."""
    out = [("", 0.0)]
    for tool in TOOLS:
        out += [(tool, s * STEPS[tool][z]) for s, z in zip(SIGNS, SIZES)]
    return out


ACTIONS = action_table()


def describe(action: int) -> str:
    tool, amount = ACTIONS[action]
    return "stop" if not tool else f"{tool} {amount:+g}"


def lab(x: torch.Tensor) -> torch.Tensor:
    import kornia.color

    return kornia.color.rgb_to_lab(x.clamp(0, 1))


def apply_tool(x: torch.Tensor, tool: str, amount: torch.Tensor) -> torch.Tensor:
    """``tool`` with a per-image amount (B,) on images (B, 3, H, W); clamped to [0, 1]. Images whose amount
    is 0 are returned unchanged (and not computed)."""
    sel = torch.nonzero(amount != 0)[:, 0]
    if len(sel) == 0:
        return x
    out = x.clone()
    out[sel] = _tool(x[sel], tool, amount[sel].to(x.dtype)).clamp(0, 1)
    return out


def _tool(x: torch.Tensor, tool: str, a: torch.Tensor) -> torch.Tensor:
    import kornia.color
    import kornia.enhance as ke

    k = a.view(-1, 1, 1, 1)
    if tool == "exposure":
        y = x * torch.pow(2.0, k)
    elif tool == "contrast":
        y = ke.adjust_contrast_with_mean_subtraction(x, (1 + a).clamp(min=0))
    elif tool == "gamma":
        y = ke.adjust_gamma(x.clamp(1e-4, 1), torch.pow(2.0, -a))
    elif tool == "saturation":
        y = ke.adjust_saturation(x, (1 + a).clamp(min=0))
    elif tool == "temperature":
        L = lab(x)
        L = torch.cat([L[:, :2], L[:, 2:] + k], 1)
        y = kornia.color.lab_to_rgb(L, clip=True)
    elif tool == "sharpen":
        y = ke.sharpness(x, (1 + a).clamp(min=0))
    elif tool == "shadows":
        mask = ((40.0 - lab(x)[:, :1]) / 25.0).clamp(0, 1)
        y = x * (1 + mask * (torch.pow(2.0, k) - 1))
    else:
        raise ValueError(f"unknown tool {tool!r}")
    return y


def apply_actions(x: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """One action per image (``stop`` leaves it unchanged)."""
    out = x
    table = ACTIONS
    for tool in TOOLS:
        amount = torch.tensor([table[int(a)][1] if table[int(a)][0] == tool else 0.0 for a in actions])
        out = apply_tool(out, tool, amount)
    return out


def apply_params(x: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
    """Continuous amounts (B, len(TOOLS)) applied tool by tool in the canonical order of ``TOOLS``."""
    for i, tool in enumerate(TOOLS):
        x = apply_tool(x, tool, params[:, i])
    return x


N_FEATURES = 10


def features(x: torch.Tensor) -> torch.Tensor:
    """Global statistics a retoucher looks at, scaled to about unit range (B, N_FEATURES)."""
    import kornia.filters

    L = lab(x)
    l, a, b = L[:, 0].flatten(1) / 100, L[:, 1].flatten(1) / 50, L[:, 2].flatten(1) / 50
    chroma = torch.sqrt(a ** 2 + b ** 2)
    lap = kornia.filters.laplacian(L[:, :1] / 100, 3).flatten(1)
    q = torch.quantile(l, torch.tensor([0.1, 0.9]), dim=1).T
    return torch.stack([l.mean(1), l.std(1) * 3, q[:, 0], q[:, 1], a.mean(1) * 3, b.mean(1) * 3, chroma.mean(1) * 2,
                        (l < 0.25).float().mean(1), (l > 0.85).float().mean(1),
                        torch.log(lap.var(1) + 1e-5) / 5 + 1], 1)


def delta_e(x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Mean CIEDE2000 colour difference per image (scikit-image), the judge's perceptual distance."""
    from skimage.color import deltaE_ciede2000

    lx, ly = (lab(t).permute(0, 2, 3, 1).double().numpy() for t in (x, y))
    return deltaE_ciede2000(lx, ly, channel_axis=-1).reshape(len(x), -1).mean(1)


def delta_e94(x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Mean CIE94 colour difference per image (scikit-image, graphic-arts weights): a second colour metric that no
    arm is trained or tuned on (held out from the judge, which uses CIEDE2000)."""
    from skimage.color import deltaE_ciede94

    lx, ly = (lab(t).permute(0, 2, 3, 1).double().numpy() for t in (x, y))
    return deltaE_ciede94(ly, lx, channel_axis=-1).reshape(len(x), -1).mean(1)


def ssim(x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """SSIM per image (scikit-image, RGB, data range 1)."""
    from skimage.metrics import structural_similarity

    xa, ya = (t.permute(0, 2, 3, 1).double().numpy() for t in (x, y))
    win = min(7, xa.shape[1] - (1 - xa.shape[1] % 2), xa.shape[2] - (1 - xa.shape[2] % 2))
    return np.array([structural_similarity(p, q, channel_axis=-1, data_range=1.0, win_size=win)
                     for p, q in zip(xa, ya)])


def proxy_quality(x: torch.Tensor) -> torch.Tensor:
    """No-reference quality score (higher = 'better'): log sharpness + colourfulness + RMS contrast, minus a
    penalty on clipped pixels (values within 0.01 of 0 or 1), as no-reference scores penalise blown highlights.

    The kind of score whose increments the abstract calls dense proxy rewards: big edits clip and lose score,
    while every small sharpening, contrast or local shadow step still gains a little, however small the step is
    perceptually, so its per-edit gain over-values small, perceptually negligible edits.
    """
    import kornia.filters

    gray = x.mean(1, keepdim=True)
    sharp = torch.log(kornia.filters.laplacian(gray, 3).flatten(1).var(1) + 1e-6)
    rg = x[:, 0] - x[:, 1]
    yb = 0.5 * (x[:, 0] + x[:, 1]) - x[:, 2]
    colourful = (torch.sqrt(rg.flatten(1).var(1) + yb.flatten(1).var(1))
                 + 0.3 * torch.sqrt(rg.flatten(1).mean(1) ** 2 + yb.flatten(1).mean(1) ** 2))  # Hasler-Suesstrunk
    clipped = ((x <= 0.01) | (x >= 0.99)).float().flatten(1).mean(1)
    return sharp + 4 * colourful + 2 * gray.flatten(1).std(1) - 20 * clipped
