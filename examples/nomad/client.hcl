# A Nomad client on a GPU node with allot-nvml, allot's device plugin.
# Copy the allot-nvml binary into plugin_dir; Nomad loads an external plugin
# only when a plugin block names its file. GPUs then show up as nvidia/gpu
# devices (jobs ask: device "nvidia/gpu" { count = 8 }), with each GPU's
# health (XID errors, ECC, row remaps, fallen off the bus) for allot's drains.

data_dir   = "/opt/nomad/data"
plugin_dir = "/opt/nomad/plugins"

client {
  enabled   = true
  node_pool = "gpu" # matches nomad { node_pools } of the allot server config
}

plugin "allot-nvml" {
  config {
    enabled            = true
    fingerprint_period = "1m"
    check_ecc          = true
    check_row_remap    = true
    # XIDs that never make a GPU unhealthy; absent: allot-nvml's defaults.
    # xid_ignore = [13, 31, 43, 45, 68, 109]
    # GPU UUIDs to leave out of fingerprints and stats.
    ignored_gpu_ids = []

    # Fake mode, for trying allot without GPUs: a go-nvml mock machine
    # (dgxa100, dgxh100, dgxh200 or dgxb200) and a directory to inject faults.
    # fake           = "dgxh100"
    # fake_state_dir = "/tmp/allot-nvml-faults"
  }
}
