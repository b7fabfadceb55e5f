"""The MuJoCo task: a planar two-link arm pushes a puck to a goal, controlled at 60 Hz.

The scene is an MJCF string built here (nothing is downloaded). An action is the fingertip's target
position (x, y) in metres, as the paper's actions are end-effector poses; the environment turns it into
joint targets by analytic inverse kinematics for the position actuators. Physics runs at 300 Hz, 5
substeps per control tick. The fingertip (a sphere) touches the puck (a cylinder on two slide joints with
damping and friction loss, standing in for table friction); that contact is the task's only way to move
the puck. ``PushBatch`` steps many episodes side by side so that a policy's forward pass is batched.

The scripted expert tracks a smooth reference: a target point (behind the puck, then through it towards
the goal, re-aimed every tick from the puck's current position, with a detour around the puck when it
stands in the way) is filtered by a critically damped second-order system with a speed limit, so its
60 Hz actions are smooth and its chunks are what a policy should imitate.
"""

from __future__ import annotations

import os

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")  # headless; nothing here renders, but an import must not need a display

FPS = 60
SUBSTEPS = 5
L1, L2 = 0.25, 0.25          # link lengths (m)
R_TIP, R_PUCK = 0.015, 0.03  # fingertip sphere and puck radii (m)
CONTACT = R_TIP + R_PUCK
GOAL_TOL = 0.035             # success: puck centre within this distance of the goal (m)
TIP_START = np.array([0.12, 0.0])
OBS_NAMES = ("tip_x", "tip_y", "tip_vx", "tip_vy", "puck_x", "puck_y", "goal_x", "goal_y", "cmd_x", "cmd_y")
ACT_DIM = 2

MJCF = f"""
<mujoco model="rtr_push">
  <compiler angle="radian"/>
  <option timestep="{1.0 / (FPS * SUBSTEPS):.8f}" gravity="0 0 0" integrator="implicitfast"/>
  <default><joint damping="0.3" armature="0.005"/></default>
  <worldbody>
    <body name="link1" pos="0 0 0.03">
      <joint name="shoulder" type="hinge" axis="0 0 1" range="-3.1 3.1"/>
      <geom type="capsule" fromto="0 0 0 {L1} 0 0" size="0.012" contype="0" conaffinity="0" mass="0.3"/>
      <body name="link2" pos="{L1} 0 0">
        <joint name="elbow" type="hinge" axis="0 0 1" range="-2.9 2.9"/>
        <geom type="capsule" fromto="0 0 0 {L2} 0 0" size="0.01" contype="0" conaffinity="0" mass="0.2"/>
        <body name="tip" pos="{L2} 0 0">
          <geom name="tip" type="sphere" size="{R_TIP}" mass="0.02" contype="1" conaffinity="2" friction="0.2"/>
        </body>
      </body>
    </body>
    <body name="puck" pos="0 0 0.03">
      <joint name="puck_x" type="slide" axis="1 0 0" damping="0.6" frictionloss="0.04"/>
      <joint name="puck_y" type="slide" axis="0 1 0" damping="0.6" frictionloss="0.04"/>
      <geom name="puck" type="cylinder" size="{R_PUCK} 0.012" mass="0.1" contype="2" conaffinity="1" friction="0.2"/>
    </body>
  </worldbody>
  <actuator>
    <position name="shoulder" joint="shoulder" kp="60" kv="3"/>
    <position name="elbow" joint="elbow" kp="40" kv="2"/>
  </actuator>
</mujoco>
"""


def load_model():
    """The compiled MuJoCo model; a clear error if MuJoCo is missing or cannot run here (no fallback)."""
    try:
        import mujoco
    except ImportError as exc:  # pragma: no cover - environment problem
        raise RuntimeError("rtr needs the `mujoco` package (pinned in envs/requirements.lock); "
                           "install it with `.venv/bin/pip install -r envs/requirements.lock`") from exc
    try:
        return mujoco, mujoco.MjModel.from_xml_string(MJCF)
    except Exception as exc:  # pragma: no cover
        raise RuntimeError(f"MuJoCo could not compile the rtr scene: {exc}") from exc


def ik(target: np.ndarray) -> np.ndarray:
    """Joint angles (shoulder, elbow; elbow-left branch) that put the fingertip at ``target`` (..., 2)."""
    x, y = target[..., 0], target[..., 1]
    r2 = np.clip(x * x + y * y, (0.03) ** 2, (L1 + L2 - 1e-3) ** 2)
    c2 = np.clip((r2 - L1 * L1 - L2 * L2) / (2 * L1 * L2), -1.0, 1.0)
    q2 = np.arccos(c2)
    q1 = np.arctan2(y, x) - np.arctan2(L2 * np.sin(q2), L1 + L2 * np.cos(q2))
    return np.stack([q1, q2], -1)


def fk(q: np.ndarray) -> np.ndarray:
    """Fingertip position of joint angles (..., 2)."""
    q1, q12 = q[..., 0], q[..., 0] + q[..., 1]
    return np.stack([L1 * np.cos(q1) + L2 * np.cos(q12), L1 * np.sin(q1) + L2 * np.sin(q12)], -1)


def sample_tasks(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, 4) puck (x, y) and goal (x, y): the puck ahead of the start, the goal 9-15 cm further on,
    within 50 degrees of straight ahead, and inside the arm's reach when pushed from behind."""
    out = np.zeros((n, 4))
    for i in range(n):
        while True:
            puck = np.array([rng.uniform(0.22, 0.29), rng.uniform(-0.10, 0.10)])
            ang = rng.uniform(-np.radians(50), np.radians(50))
            goal = puck + rng.uniform(0.09, 0.15) * np.array([np.cos(ang), np.sin(ang)])
            if np.linalg.norm(goal) < L1 + L2 - CONTACT - 0.03 and abs(goal[1]) < 0.2:
                out[i] = np.r_[puck, goal]
                break
    return out


class PushBatch:
    """``n`` episodes of the push task stepped together (one MjData each)."""

    def __init__(self, tasks: np.ndarray):
        self.mujoco, self.model = load_model()
        self.n = len(tasks)
        self.goal = tasks[:, 2:4].copy()
        self.data = [self.mujoco.MjData(self.model) for _ in range(self.n)]
        q0 = ik(TIP_START)
        for d, t in zip(self.data, tasks):
            d.qpos[:] = [q0[0], q0[1], t[0], t[1]]
            d.ctrl[:] = q0
            self.mujoco.mj_forward(self.model, d)
        self.cmd = np.tile(TIP_START, (self.n, 1))
        self._read()
        self.done = np.zeros(self.n, bool)
        self.done_tick = np.full(self.n, -1)
        self.tick = 0
        self._update_done()

    def _read(self) -> None:
        self.qpos = np.array([d.qpos for d in self.data])
        self.qvel = np.array([d.qvel for d in self.data])

    def tip(self) -> np.ndarray:
        return fk(self.qpos[:, :2])

    def tip_velocity(self) -> np.ndarray:
        q, qd = self.qpos[:, :2], self.qvel[:, :2]
        q1, q12 = q[:, 0], q[:, 0] + q[:, 1]
        vx = -L1 * np.sin(q1) * qd[:, 0] - L2 * np.sin(q12) * (qd[:, 0] + qd[:, 1])
        vy = L1 * np.cos(q1) * qd[:, 0] + L2 * np.cos(q12) * (qd[:, 0] + qd[:, 1])
        return np.stack([vx, vy], -1)

    def puck(self) -> np.ndarray:
        return self.qpos[:, 2:4].copy()

    def obs(self) -> np.ndarray:
        """(n, 10): fingertip position and velocity, puck, goal, last commanded target (see OBS_NAMES)."""
        return np.concatenate([self.tip(), self.tip_velocity(), self.puck(), self.goal, self.cmd], 1)

    def _update_done(self) -> None:
        hit = np.linalg.norm(self.puck() - self.goal, axis=1) < GOAL_TOL
        new = hit & ~self.done
        self.done_tick[new] = self.tick
        self.done |= hit

    def step(self, action: np.ndarray) -> None:
        """Apply fingertip targets (n, 2) for one 60 Hz tick."""
        self.cmd = np.asarray(action, float).copy()
        q = ik(self.cmd)
        for d, qi in zip(self.data, q):
            d.ctrl[:] = qi
            self.mujoco.mj_step(self.model, d, nstep=SUBSTEPS)
        self._read()
        self.tick += 1
        self._update_done()


class Expert:
    """The scripted pusher (batched): target point by phase, then a smooth speed-limited reference."""

    def __init__(self, n: int, omega: float = 14.0, vmax: float = 0.22):
        self.ref = np.tile(TIP_START, (n, 1))
        self.vel = np.zeros((n, 2))
        self.omega, self.vmax = omega, vmax
        self.pushing = np.zeros(n, bool)

    def target(self, tip: np.ndarray, puck: np.ndarray, goal: np.ndarray, done: np.ndarray) -> np.ndarray:
        to_goal = goal - puck
        u = to_goal / np.maximum(np.linalg.norm(to_goal, axis=1, keepdims=True), 1e-9)
        normal = np.stack([-u[:, 1], u[:, 0]], 1)
        rel = self.ref - puck
        along, lateral = (rel * u).sum(1), (rel * normal).sum(1)
        pre = puck - u * (CONTACT + 0.02)
        aligned = (along < -CONTACT + 0.012) & (np.abs(lateral) < 0.012)
        self.pushing = np.where(self.pushing, (along < 0) & (np.abs(lateral) < 0.02), aligned)
        self.pushing &= ~done
        # pushing: aim through the puck towards the goal, steering the lateral error away
        dist = np.linalg.norm(to_goal, axis=1, keepdims=True)
        push = puck + u * np.minimum(0.03, dist) - normal * (2.0 * lateral)[:, None]
        # approach: straight to the pre-push point, or around the puck when it is in the way
        side = np.where(lateral >= 0, 1.0, -1.0)[:, None]
        around = puck + normal * side * (CONTACT + 0.025) - u * (CONTACT + 0.02)
        blocked = (along > -CONTACT) & (np.abs(lateral) < CONTACT + 0.02)
        approach = np.where(blocked[:, None], around, pre)
        tgt = np.where(self.pushing[:, None], push, approach)
        return np.where(done[:, None], self.ref, tgt)

    def act(self, tip, puck, goal, done) -> np.ndarray:
        tgt = self.target(tip, puck, goal, done)
        dt, w = 1.0 / FPS, self.omega
        acc = w * w * (tgt - self.ref) - 2 * w * self.vel
        self.vel = self.vel + acc * dt
        speed = np.linalg.norm(self.vel, axis=1, keepdims=True)
        self.vel *= np.minimum(1.0, self.vmax / np.maximum(speed, 1e-12))
        self.vel[done] *= 0.8  # come to rest once the puck is in
        self.ref = self.ref + self.vel * dt
        return self.ref.copy()


def run_expert(tasks: np.ndarray, ticks: int) -> dict[str, np.ndarray]:
    """Roll the expert out on ``tasks``: obs (n, T, 10), actions (n, T, 2), done tick per episode."""
    env = PushBatch(tasks)
    ex = Expert(env.n)
    obs = np.zeros((env.n, ticks, len(OBS_NAMES)))
    act = np.zeros((env.n, ticks, ACT_DIM))
    for t in range(ticks):
        obs[:, t] = env.obs()
        act[:, t] = ex.act(env.tip(), env.puck(), env.goal, env.done)
        env.step(act[:, t])
    return {"obs": obs, "act": act, "done_tick": env.done_tick.copy(), "success": env.done.copy()}
