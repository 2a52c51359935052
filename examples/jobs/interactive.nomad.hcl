# An interactive session: one GPU to work on by hand for up to 8 hours.
#
#   nomad job run examples/jobs/interactive.nomad.hcl
#   nomad alloc exec -i -t -task shell <alloc-id> /bin/sh   # a shell in the session
#   nomad job stop notebook-alice                          # done: give the GPU back
#
# A minimum runtime of 8h (the default cap) protects the session for its
# whole life: nobody's fair share can take the GPU from under someone typing.
# It is charged for all of it, so stop the job when you are done.
job "notebook-alice" {
  type = "batch"

  # The GPU clients' node pool (examples/nomad/client.hcl). Without it the
  # job waits forever: "No nodes were eligible for evaluation".
  node_pool = "gpu"

  meta {
    budget      = "ai2/vision/perception" # a leaf of the budget tree
    min_runtime = "8h"                    # protected for the whole session (8h is the cap)
    resumable   = "false"                 # a moved session loses its state
  }

  group "session" {
    count = 1

    restart {
      attempts = 0
      mode     = "fail"
    }

    task "shell" {
      # raw_exec keeps the example runnable on a `nomad agent -dev`, and
      # `nomad alloc exec` works with it. On a real cluster use your usual
      # driver (docker, exec) and image, e.g. one running jupyter lab.
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo \"session on GPU $NVIDIA_VISIBLE_DEVICES; attach with nomad alloc exec\"; exec sleep 28800"]
      }

      resources {
        cpu    = 1000
        memory = 1024

        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
