# allot as a Nomad service job: three `allot server` replicas forming one
# raft group over static addresses, each keeping its raft log on a host
# volume of the node it runs on.
#
# Before the first run, on each of the three nodes:
#   1. the allot binary at var.allot_binary (make build; copy bin/allot);
#   2. a host volume named "allot-data" in the Nomad client's config:
#        client {
#          host_volume "allot-data" {
#            path      = "/opt/allot/data"
#            read_only = false
#          }
#        }
# and once, the tokens the servers read (Nomad Variables, readable by this
# job only; the Nomad token needs the policy in nomad-acl-policy.hcl):
#   nomad var put nomad/jobs/allot allot_token=$(uuidgen) operator_token=$(uuidgen) nomad_token=<secret ID>
# Then:
#   nomad job run -var 'servers=["10.0.0.5","10.0.0.6","10.0.0.7"]' examples/deploy/allot.nomad.hcl
#   export ALLOT_ADDR=http://10.0.0.5:4650 ALLOT_TOKEN=<allot_token>
#   allot budgets apply budgets/
#
# allot's state is replicated: a replica whose node is lost is replaced by
# restarting it on a node with an empty allot-data volume and the same
# address, or by changing var.servers (the new one joins through
# retry_join). Keep the three nodes out of the GPU node pool, or at least
# keep this job's priority above 89, so no pending GPU job can preempt it.

variable "servers" {
  description = "IP addresses of the nodes that run the allot servers: 1, 3 or 5 (raft peers find each other here)"
  type        = list(string)
  default     = ["10.0.0.5", "10.0.0.6", "10.0.0.7"]
}

variable "nomad_address" {
  description = "the Nomad HTTP API allot drives"
  type        = string
  default     = "https://nomad.service.consul:4646"
}

variable "node_pool" {
  description = "node pool of the nodes in var.servers (not the GPU pool)"
  type        = string
  default     = "default"
}

variable "allot_binary" {
  description = "path of the allot binary on each node"
  type        = string
  default     = "/usr/local/bin/allot"
}

variable "driver" {
  description = "exec (chroot and cgroups; the host volume is mounted at var.data_dir) or raw_exec (no isolation and no mounts: var.data_dir is the host volume's own path)"
  type        = string
  default     = "exec"
}

variable "data_dir" {
  description = "allot's data_dir as the task sees it"
  type        = string
  default     = "/var/lib/allot"
}

variable "http_port" {
  description = "allot's HTTP API port (ALLOT_ADDR), static: retry_join and Prometheus use it"
  type        = number
  default     = 4650
}

variable "raft_port" {
  description = "allot's raft port, static"
  type        = number
  default     = 4651
}

job "allot" {
  type      = "service"
  node_pool = var.node_pool

  # Above every priority allot gives a pending job (at most 89): Nomad's
  # preemption needs a gap of 10, so allot's own servers are out of reach.
  priority = 95

  group "server" {
    count = length(var.servers)

    # One replica per node, and only on the nodes of var.servers.
    constraint {
      distinct_hosts = true
    }
    constraint {
      attribute = "${attr.unique.network.ip-address}"
      operator  = "set_contains_any"
      value     = join(",", var.servers)
    }

    # Places each replica on a node with the allot-data host volume.
    volume "data" {
      type      = "host"
      source    = "allot-data"
      read_only = false
    }

    network {
      port "http" {
        static = var.http_port
      }
      port "raft" {
        static = var.raft_port
      }
    }

    # Nomad's own service discovery: `nomad service info allot`, and the
    # Prometheus scrape in prometheus.yml finds the servers through it.
    service {
      provider = "nomad"
      name     = "allot"
      port     = "http"
      tags     = ["metrics"]

      check {
        type     = "http"
        path     = "/v1/agent/self"
        interval = "10s"
        timeout  = "2s"
      }
    }

    # One server at a time, each healthy before the next: the raft group
    # keeps its quorum through a rolling update.
    update {
      max_parallel     = 1
      health_check     = "checks"
      min_healthy_time = "10s"
      healthy_deadline = "3m"
    }

    # Leave the service catalog 5s before the server stops, so Prometheus
    # and clients following `nomad service info allot` move on first.
    shutdown_delay = "5s"

    restart {
      attempts = 10
      interval = "10m"
      delay    = "10s"
      mode     = "delay"
    }

    task "allot" {
      driver = var.driver

      config {
        command = var.allot_binary
        args    = ["server", "-config", "${NOMAD_TASK_DIR}/allot.hcl"]
      }

      # exec mounts the host volume; raw_exec cannot (Nomad refuses the
      # mount), so there data_dir is the volume's host path itself.
      dynamic "volume_mount" {
        for_each = var.driver == "raw_exec" ? [] : ["data"]
        content {
          volume      = volume_mount.value
          destination = var.data_dir
        }
      }

      # allot stops on SIGTERM (or SIGINT): it leaves the raft group's
      # leadership and flushes the log before exiting.
      kill_signal  = "SIGTERM"
      kill_timeout = "20s"

      template {
        destination = "local/allot.hcl"
        change_mode = "restart"
        data        = <<-EOT
          data_dir         = "${var.data_dir}"
          bind_addr        = "{{ env "NOMAD_IP_http" }}"
          advertise_addr   = "{{ env "NOMAD_IP_http" }}"
          bootstrap_expect = ${length(var.servers)}
          retry_join       = ${jsonencode([for s in var.servers : "${s}:${var.http_port}"])}
          log_level        = "info"

          ports {
            http = {{ env "NOMAD_PORT_http" }}
            raft = {{ env "NOMAD_PORT_raft" }}
          }

          # The servers join each other with the operator token, which
          # also authorises remove-peer and allot nodes return.
          server {
            operator_token = "{{ with nomadVar "nomad/jobs/allot" }}{{ .operator_token }}{{ end }}"
          }

          nomad {
            address    = "${var.nomad_address}"
            node_pools = ["gpu"]
            # Preemption for batch and service jobs must be on: run
            # nomad operator scheduler set-config -preempt-batch-scheduler=true -preempt-service-scheduler=true
            manage_scheduler_config = false
          }
        EOT
      }

      # ALLOT_TOKEN authorises budget applies and ledger writes (not
      # operator actions: those take the operator token above);
      # NOMAD_TOKEN is the ACL token allot drives Nomad with.
      template {
        destination = "secrets/allot.env"
        env         = true
        change_mode = "restart"
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/allot" }}
          ALLOT_TOKEN={{ .allot_token }}
          NOMAD_TOKEN={{ .nomad_token }}
          {{ end }}
        EOT
      }

      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }
}
