"""Engine layer: liveness, memory planners and their checker (shared by every
device), and one module per device (``cpu`` today)."""
from .checker import PlanError, check_plan
from .cpu import CpuProgram, RunContext
from .cpu_kernels import KERNELS, KernelError, build_kernel
from .liveness import Liveness, analyse
from .naive import evaluate_naive
from .planners import PLANNERS, Plan, make_plan, plan_blocks, plan_offsets

__all__ = ["PlanError", "check_plan", "CpuProgram", "RunContext", "KERNELS", "KernelError",
           "build_kernel", "Liveness", "analyse", "evaluate_naive", "PLANNERS", "Plan", "make_plan",
           "plan_blocks", "plan_offsets"]
