# A debug job: one GPU for a quick look at a bug, wanted now.
#
#   nomad job run examples/jobs/debug.nomad.hcl
#   allot explain job default/debug-tokenizer
#
# allot reads the job-level meta block below (README.md, "Running jobs under
# allot", lists every key). A short min_runtime is what makes a debug job
# start fast: it is allocated work, so it sits above every unallocated job
# (Nomad preempts free work for it at once), and a protected window of 15m
# is cheap for fair share to grant.
job "debug-tokenizer" {
  type = "batch"

  # The node pool of the GPU clients (examples/nomad/client.hcl sets
  # client { node_pool = "gpu" }). A job without node_pool is in the
  # "default" pool: it never places on a GPU node and waits forever, and
  # `nomad job status` says "No nodes were eligible for evaluation".
  node_pool = "gpu"

  meta {
    budget      = "ai2/nlp/reasoning" # a leaf of the budget tree: `allot budgets show`
    min_runtime = "15m"               # protected (and charged) for 15 minutes once running
    resumable   = "false"             # a debug run restarts from the start if moved
    priority    = "80"                # ahead of this budget's other jobs (default 50)
  }

  # allot owns the job's Nomad priority: leave `priority` unset here. Every
  # GPU job is re-prioritised by allot within seconds of `nomad job run`.

  group "debug" {
    count = 1

    # A debug run that fails is looked at, not retried.
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }

    task "repro" {
      # raw_exec keeps the example runnable on a `nomad agent -dev`. On a
      # real cluster use your usual driver (docker, exec) and image.
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args = ["-c", <<-EOT
          echo "debug run on GPU(s) $NVIDIA_VISIBLE_DEVICES of $(hostname), budget $NOMAD_META_budget"
          exec sleep 600
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
