# A resumable multi-node training job: two allocations on two GPU nodes,
# 8 GPUs each, protected for 4 hours at a time.
#
#   nomad job run examples/jobs/train.nomad.hcl
#   allot explain job default/olmo-7b-pretrain
#
# allot treats the job as one: its two allocations are protected, pending or
# stopped together. While one of them runs and the other waits (Nomad has no
# gang placement), the job sits in the running band and its waiting
# allocation is placed before any other pending job.
job "olmo-7b-pretrain" {
  type = "batch"

  # The GPU clients' node pool (examples/nomad/client.hcl). Without it the
  # job stays in the "default" pool and waits forever: "No nodes were
  # eligible for evaluation".
  node_pool = "gpu"

  meta {
    budget      = "ai2/prior/olmo/pretrain" # a leaf of the budget tree
    min_runtime = "4h"                      # each time it runs: 4h protected and charged
    resumable   = "true"                    # may be stopped past its window and requeued
    priority    = "70"                      # only orders ai2/prior/olmo/pretrain's own jobs
  }

  group "train" {
    count = 2 # one allocation per node

    constraint {
      distinct_hosts = true
    }

    # Stopped past its window, the job is requeued by Nomad (a migration,
    # no reschedule attempt spent) and resumes from its last checkpoint.
    # A crash is a different matter: retry once in place, then give up.
    restart {
      attempts = 1
      delay    = "30s"
      mode     = "fail"
    }

    task "trainer" {
      # raw_exec keeps the example runnable on a `nomad agent -dev`. On a
      # real cluster use your usual driver (docker, exec) and image.
      driver = "raw_exec"

      # A stop (allot's time slicing, a drain, Nomad's preemption) sends
      # kill_signal and waits kill_timeout before SIGKILL: write a checkpoint
      # in that time. Nomad clamps kill_timeout to the client's
      # max_kill_timeout (default 30s).
      kill_signal  = "SIGINT"
      kill_timeout = "30s"

      config {
        command = "/bin/sh"
        args = ["-c", <<-EOT
          ckpt="$NOMAD_ALLOC_DIR/data/checkpoint"
          trap 'echo "rank $NOMAD_ALLOC_INDEX: checkpoint at step $step" >"$ckpt"; exit 0' INT TERM
          step=0
          [ -f "$ckpt" ] && echo "resuming: $(cat "$ckpt")"
          echo "rank $NOMAD_ALLOC_INDEX of 2 on GPUs $NVIDIA_VISIBLE_DEVICES"
          while :; do step=$((step+1)); sleep 60; done
        EOT
        ]
      }

      resources {
        cpu    = 2000
        memory = 2048

        device "nvidia/gpu" {
          count = 8
        }
      }
    }
  }
}
