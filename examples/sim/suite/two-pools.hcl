# Two GPU models in two node pools (the suite's two-pools scenario): a
# generated trace spreads its jobs over the pools by their GPUs, each job
# naming its pool's node_pool and model (sim.SpreadOverPools).
pool "h100" {
  nodes         = 80
  gpus_per_node = 8
  model         = "h100"
}

pool "b200" {
  nodes         = 48
  gpus_per_node = 8
  model         = "b200"
}
