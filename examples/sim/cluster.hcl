# The cluster of the published scenario: 1,024 H100 GPUs, 128 nodes of 8.
# allot sim -cluster examples/sim/cluster.hcl -budgets examples/budgets
# Add pools for a mixed cluster; the simulator names each pool's nodes
# <pool>-0, <pool>-1, ... (health events in a trace use these names).

pool "default" {
  nodes         = 128
  gpus_per_node = 8
  model         = "h100" # optional; "h100" when absent
}
