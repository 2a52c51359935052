# An unallocated sweep: four one-GPU trials of a learning-rate sweep, run
# for free on GPUs nobody else needs right now.
#
#   nomad job run examples/jobs/sweep.nomad.hcl
#   allot queue
#
# min_runtime = "0" makes the job unallocated: never charged to a budget,
# never protected, and preempted by Nomad at once whenever allocated work
# needs its GPUs (its allocations are then requeued and run again when GPUs
# free up). This is how the cluster stays full.
job "lr-sweep" {
  type = "batch"

  # The GPU clients' node pool (examples/nomad/client.hcl). Without it the
  # job waits forever: "No nodes were eligible for evaluation".
  node_pool = "gpu"

  meta {
    min_runtime = "0"    # unallocated: free, always preemptible (no budget needed)
    resumable   = "true" # each trial resumes from its own checkpoint
  }

  group "trial" {
    count = 4

    task "trial" {
      # raw_exec keeps the example runnable on a `nomad agent -dev`. On a
      # real cluster use your usual driver (docker, exec) and image.
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args = ["-c", <<-EOT
          lr=$(echo "1e-4 3e-4 1e-3 3e-3" | cut -d' ' -f$((NOMAD_ALLOC_INDEX+1)))
          echo "trial $NOMAD_ALLOC_INDEX: lr=$lr on GPU $NVIDIA_VISIBLE_DEVICES"
          exec sleep 3600
        EOT
        ]
      }

      resources {
        cpu    = 500
        memory = 512

        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
