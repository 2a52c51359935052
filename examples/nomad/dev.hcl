# A `nomad agent -dev` for trying allot on a machine without GPUs: the client
# joins node pool "gpu" (as examples/nomad/client.hcl does on real GPU nodes)
# and allot-nvml serves a simulated DGX H100 (8 fake H100s). From the repo
# root, after `make build`:
#
#   nomad agent -dev -bind=127.0.0.1 -plugin-dir=$PWD/bin -config=examples/nomad/dev.hcl
#
# (-plugin-dir=$PWD/bin: Nomad starts only the plugins a plugin block names,
# so bin/allot is skipped with a warning.)

client {
  node_pool = "gpu"

  options {
    # Cloud metadata probes are slow or fatal off-cloud (AWS_CA_BUNDLE).
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
  }
}

plugin "allot-nvml" {
  config {
    fake               = "dgxh100"                # go-nvml's mock DGX H100: 8 GPUs
    fake_state_dir     = "/tmp/allot-nvml-faults" # allot-nvml inject -state /tmp/allot-nvml-faults xid 79 GPU-...
    fingerprint_period = "5s"
  }
}
