"""How many clusters of the WS GEMM's ``CLUSTER_M=2`` kernels the GPU holds at once.

A persistent kernel launches one program per SM (``num_programs // 2`` clusters of two CTAs);
if the GPU cannot hold that many clusters at once, the last ones start only when others
finish and the kernel takes up to twice as long.  This asks the driver
(``cuOccupancyMaxActiveClusters``) for each kernel, with its shared memory and threads.

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/cluster_occupancy.py``.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized"))

import ws_gemm  # noqa: E402
from gluonkit.runtime import driver  # noqa: E402

CONFIGS = {"mc2 coop 2x128x256 s4": dict(BN=256, STAGES=4, CLUSTER_M=2),
           "mc2 pp 2x128x128 s6": dict(BN=128, STAGES=6, PINGPONG=True, CLUSTER_M=2)}


def max_active_clusters(compiled, grid_ctas: int) -> int:
    """The driver's ``cuOccupancyMaxActiveClusters`` for ``compiled`` launched on ``grid_ctas`` CTAs."""
    cu = driver._cu
    driver.ensure_context()
    kernel = driver.load_module(compiled.asm["cubin"], compiled.asm["ptx"]).get_kernel(compiled.name)
    shared = compiled.metadata["shared"]
    kernel.set_dynamic_shared_memory(shared)
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid_ctas, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = compiled.metadata["num_threads"], 1, 1
    config.sharedMemBytes = shared
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = compiled.metadata["num_ctas"], 1, 1
    config.attrs, config.numAttrs = [attr], 1
    try:
        return driver.call("cuOccupancyMaxActiveClusters", kernel.handle, config)
    except driver.CudaError:  # the cluster shape is compiled in (.reqnctapercluster): ask without the attribute
        config.attrs, config.numAttrs = [], 0
        return driver.call("cuOccupancyMaxActiveClusters", kernel.handle, config)


def main() -> None:
    sms = driver.device_properties().sm_count
    print(f"{driver.device_properties().name}: {sms} SMs")
    for name, cfg in CONFIGS.items():
        compiled = ws_gemm.compile_ahead("sm_90a", **cfg)
        try:
            clusters = max_active_clusters(compiled, sms)
        except Exception as exc:  # report and go on: this is a probe
            print(f"{name}: cuOccupancyMaxActiveClusters failed: {exc}")
            continue
        print(f"{name}: {compiled.metadata['shared']} B shared, {compiled.metadata['num_threads']} threads: "
              f"at most {clusters} clusters at once (the GEMM launches {sms // 2})")


if __name__ == "__main__":
    main()
