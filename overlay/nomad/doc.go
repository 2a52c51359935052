// Package nomad is allot's only adapter to Nomad and the only importer of
// github.com/hashicorp/nomad/api: it watches Nomad's event stream into a View,
// builds the policy's Snapshot from it and applies a Plan through Nomad's own
// levers (job priority with check-and-set, migrate-stops, evaluations, node
// eligibility). It decides nothing: every choice comes from overlay/policy.
package nomad
