"""A seeded synthetic ads world with drifting interests, repeating candidates and history-dependent clicks.

It exists so the whole loop can be exercised without real logs, and so a sequence-aware FM has something a
small id-based model cannot learn: fatigue, category momentum and drift are functions of the user's history.
"""

from solaris.data.synthetic.config import PRESETS, GroundTruth, WorldConfig, preset
from solaris.data.synthetic.world import generate_world

__all__ = ["PRESETS", "GroundTruth", "WorldConfig", "generate_world", "preset"]
