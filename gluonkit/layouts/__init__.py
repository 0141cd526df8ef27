"""The layout algebra: linear layouts and every distributed, shared and tensor-memory layout."""

from .linear import LinearLayout, is_power_of_two, log2_exact
from .distributed import (
    AutoLayout, BlockedLayout, CoalescedLayout, DistributedLayout, DistributedLinearLayout, SliceLayout,
)
from .nvmma import DotOperandLayout, NVMMADistributedLayout
from .shared import NVMMASharedLayout, PaddedSharedLayout, SharedLayout, SharedLinearLayout, SwizzledSharedLayout
from .barrier import MBarrierLayout
from .tmem import TensorMemoryLayout, TensorMemoryScalesLayout, get_tmem_reg_layout, scales_copy_bases
from .vectorize import SharedVector, global_vector_width, shared_vector_width, shared_vectorization
from .banks import SharedAccess, analyze_shared_access, bank_conflicts
from .conversion import ConversionPlan, plan_conversion
