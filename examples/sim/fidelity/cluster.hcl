# The fidelity harness's cluster (e2e/fidelity_test.go): three Nomad clients
# of eight fake H100s each, gpu-client-0 to gpu-client-2 in the model.
pool "gpu-client" {
  nodes         = 3
  gpus_per_node = 8
  model         = "h100"
  node_pool     = "default" # the clients name no node_pool
}
