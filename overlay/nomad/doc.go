// Package nomad is allot's only adapter to Nomad and the only importer of
// github.com/hashicorp/nomad/api. It watches Nomad's event stream (and the
// list endpoints, to resync) into a View of plain types of its own (Job,
// Alloc, Node in types.go), and applies Ops through Nomad's own levers (job
// priority with check-and-set, migrate-stops, evaluations, node
// eligibility), reporting what landed. It decides nothing and knows neither
// the policy nor allot's state: overlay/reconcile turns the View into the
// policy's snapshot and the plan into Ops.
package nomad
