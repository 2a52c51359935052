# An allot server of a three-server raft group, next to the Nomad servers.
# Start each with: allot server -config /etc/allot/allot.hcl
# (for a try-out on a laptop: allot server -dev -nomad-address http://127.0.0.1:4646
#  -manage-scheduler-config)

node_id          = "allot-1" # stable raft ID: survives the loss of data_dir (unset: kept in data_dir/identity.json)
data_dir         = "/var/lib/allot"
bind_addr        = "0.0.0.0"
advertise_addr   = "10.0.0.5" # how the other allot servers reach this one
log_level        = "info"
bootstrap_expect = 3
retry_join       = ["10.0.0.6:4650", "10.0.0.7:4650"]

ports {
  http = 4650 # allot's HTTP API (ALLOT_ADDR); next to Nomad's 4646-4648
  raft = 4651
}

server {
  # One token per capability; a client passes its token with -token or
  # ALLOT_TOKEN. Keep them out of files you commit (template them in).
  budgets_token  = "replace-with-a-long-random-token-1" # CI: allot budgets apply
  ledger_token   = "replace-with-a-long-random-token-2" # POST /v1/ledger (the leader's own loop needs none)
  operator_token = "replace-with-a-long-random-token-3" # raft join / remove-peer, allot nodes return; servers join with it
  # read_token   = "..."                                # set to require a token for reads (every token above also reads)
  # token        = "..."                                # shorthand: one token for budgets and ledger
}

tls {
  http      = true
  rpc       = true # mutual TLS between the allot servers' raft peers
  ca_file   = "/etc/allot/tls/ca.pem"
  cert_file = "/etc/allot/tls/server.pem"
  key_file  = "/etc/allot/tls/server-key.pem"
}

# The Nomad allot drives. Unset values come from Nomad's own environment
# (NOMAD_ADDR, NOMAD_TOKEN, NOMAD_CACERT, NOMAD_CLIENT_CERT, NOMAD_CLIENT_KEY,
# NOMAD_REGION), as for the nomad CLI.
nomad {
  address    = "https://nomad.service.consul:4646"
  namespaces = ["default", "research"] # empty or absent: every namespace
  node_pools = ["gpu"]                 # empty or absent: every node pool
  # allot needs Nomad's preemption on for batch and service jobs. With true it
  # turns it on at start; with false it refuses to start until an operator
  # runs `nomad operator scheduler set-config -preempt-batch-scheduler=true
  # -preempt-service-scheduler=true`.
  manage_scheduler_config = false
}

# The policy's knobs; every one is optional and shown at its default.
# `allot sim -config allot.hcl` replays a workload with this same block.
policy {
  lookback    = "7d" # fair-share window
  runtime_cap = "8h" # longest protected window a job may ask for
  # longest checkpoint_notice a job may ask for (its signal that long before a stop)
  max_checkpoint_notice = "10m"

  bands {
    protected      = 99 # allocated jobs inside their protected window: less than preemption_gap above running,
                        # so a job Nomad places again at protected never preempts the running band
    running        = 90 # allocated jobs past their window
    pending        = [40, 89]
    unallocated    = [10, 29]
    preemption_gap = 10 # Nomad's: a job preempts only 10 or more below it
  }

  margins {
    fairness   = 0.2 # how far over its share a victim's budget must be
    hysteresis = 3   # pending priorities move only by this much or more
  }

  reservation {
    max          = 1    # reservations held at once for large jobs
    nodes        = 4    # nodes one reservation may hold
    max_age      = "2h" # how long one reservation is held at most
    gather_nodes = 0    # nodes a gathering reservation may hold, for a starved gang wider than half its nodes (0: none)
  }

  bounds {
    max_evaluations = 16 # pending jobs evaluated per decision
  }

  drain {
    lead   = "1m"  # stop batch jobs this long before a Nomad drain deadline
    return = "30m" # a repaired node returns after 30m healthy; "manual": only `allot nodes return`
  }
}
