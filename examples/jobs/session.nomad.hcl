# A restorable interactive session: it runs protected for its min_runtime,
# and when allot stops it after that (time slicing, a reservation, a drain)
# it first gets its checkpoint notice: allot sends checkpoint_signal to its
# tasks, waits checkpoint_notice, then stops it (requeued). The session
# saves its state when signalled, and its next placement, which waits ahead
# of its budget's other pending work, finds what it saved.
#
#   nomad job run examples/jobs/session.nomad.hcl
#   allot explain job default/session-bob   # "notice sent at 14:02; stop at 14:07 for job X" when a stop is planned
#
# What a user writes: class = "session", checkpoint_signal (a signal the
# task traps) and checkpoint_notice (how long saving takes, at most the
# server's policy { max_checkpoint_notice }, default 10m), and a task that
# saves on the signal to storage that survives the allocation (a host
# volume, a fixed host path, or shared storage) and restores from it on
# start. It should keep running after saving: allot stops it at the end of
# the notice. (A task that exits 0 ends a batch job for good in Nomad.)
job "session-bob" {
  type      = "batch"
  node_pool = "gpu"

  meta {
    budget            = "ai2/nlp/reasoning"
    min_runtime       = "8h"      # protected up to the cap (policy { runtime_cap }, default 8h)
    class             = "session" # requeued ahead of this budget's other pending work after a stop
    checkpoint_signal = "SIGUSR1" # one of SIGHUP SIGINT SIGQUIT SIGTERM SIGUSR1 SIGUSR2 SIGALRM SIGWINCH
    checkpoint_notice = "1m"      # time from the signal to the stop
  }

  group "session" {
    count = 1

    task "shell" {
      driver = "raw_exec"

      # Nomad's own stop (and Nomad's preemption of free work) sends
      # kill_signal and waits kill_timeout: save on it too.
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      env {
        # A fixed host path, the same on every GPU client; on a real
        # cluster use a host volume or shared storage.
        STATE_DIR = "/tmp/allot-sessions/session-bob"
      }

      config {
        command = "/bin/sh"
        args = ["-c", <<-EOT
          mkdir -p "$STATE_DIR"
          state="$STATE_DIR/state"
          n=0
          if [ -f "$state" ]; then
            n=$(cat "$state")
            echo "restored session state: step $n"
          fi
          save() { echo "$n" > "$state.tmp" && mv "$state.tmp" "$state"; echo "saved session state: step $n"; }
          trap 'save' USR1
          trap 'save; exit 0' TERM INT
          while :; do
            n=$((n + 1))
            sleep 1 & wait $!
          done
        EOT
        ]
      }

      resources {
        cpu    = 200
        memory = 128

        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
