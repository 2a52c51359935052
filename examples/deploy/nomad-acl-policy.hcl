# The Nomad ACL policy of allot's token (`preflight` in overlay/nomad checks
# for it at start). allot writes only job priorities, re-evaluates and stops
# allocations (migrations), and marks nodes (in)eligible.
#
#   nomad acl policy apply -description "allot scheduling overlay" allot examples/deploy/nomad-acl-policy.hcl
#   nomad acl token create -name allot -policy allot      # its Secret ID is NOMAD_TOKEN
#
# Limit the namespace rule to the namespaces allot manages (nomad { namespaces }).
namespace "*" {
  # list-jobs and read-job: jobs, allocations and the event stream;
  # submit-job: re-register a job with a new priority, and evaluate it;
  # alloc-lifecycle: stop an allocation (a migration), and signal its tasks
  # (a checkpoint notice before a stop).
  capabilities = ["list-jobs", "read-job", "submit-job", "alloc-lifecycle"]
}

node {
  policy = "write" # eligibility: cordon unhealthy nodes, reserve nodes for large jobs
}

agent {
  policy = "read" # allot reads GET /v1/agent/self at start: Nomad's version and ACL settings
}

operator {
  # read: allot checks at start that preemption is on for batch and service
  # jobs. "write" only with manage_scheduler_config = true.
  policy = "read"
}
