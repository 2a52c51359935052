package nomad

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/nomad/api"
)

// ErrPreemptionOff is returned by Preflight when Nomad's preemption is off
// for batch or service jobs and allot may not turn it on.
var ErrPreemptionOff = errors.New("nomad preemption is off for batch or service jobs")

// PreflightReport is what allot learned about Nomad at start.
type PreflightReport struct {
	Version string // the agent's Nomad version, e.g. "2.0.6-dev"
	// ACLs is true when Nomad enforces ACLs; Token is then the token's name
	// and type, and Policies the policies it carries.
	ACLs     bool
	Token    string
	Policies []string
	// PreemptionEnabled says allot turned preemption on for batch and service.
	PreemptionEnabled bool
	// Warnings are problems that do not stop allot.
	Warnings []string
}

// Preflight checks that Nomad can be driven: the version, the token, and that
// preemption is on for batch and service jobs (allot's unallocated band relies
// on Nomad evicting it, docs/nomad-facts.md b). When manage is true it turns preemption
// on; otherwise it returns ErrPreemptionOff with the command that does.
func Preflight(ctx context.Context, client *api.Client, manage bool) (PreflightReport, error) {
	var r PreflightReport
	self, err := client.Agent().Self()
	if err != nil {
		return r, fmt.Errorf("reach nomad: %w (set NOMAD_ADDR to a Nomad server's HTTP address; with ACLs on, the token needs agent:read)", err)
	}
	r.Version = agentVersion(self)
	if r.Version == "" {
		r.Warnings = append(r.Warnings, "the agent did not report its version")
	} else if mj, mn := majorMinor(r.Version); mj < 1 || (mj == 1 && mn < 10) {
		return r, fmt.Errorf("nomad %s is too old: allot needs Nomad 1.10 or later", r.Version)
	}
	if aclEnabled(self) {
		if err := checkToken(ctx, client, &r); err != nil {
			return r, err
		}
	}
	q := (&api.QueryOptions{}).WithContext(ctx)
	resp, _, err := client.Operator().SchedulerGetConfiguration(q)
	if err != nil {
		return r, fmt.Errorf("read scheduler configuration: %w (the token needs operator:read)", err)
	}
	sc := resp.SchedulerConfig
	if sc == nil {
		return r, errors.New("nomad returned no scheduler configuration")
	}
	if sc.PreemptionConfig.BatchSchedulerEnabled && sc.PreemptionConfig.ServiceSchedulerEnabled {
		return r, nil
	}
	if !manage {
		return r, fmt.Errorf("%w (batch=%t, service=%t): run `nomad operator scheduler set-config "+
			"-preempt-batch-scheduler=true -preempt-service-scheduler=true`, or set manage_scheduler_config = true "+
			"so allot turns it on", ErrPreemptionOff,
			sc.PreemptionConfig.BatchSchedulerEnabled, sc.PreemptionConfig.ServiceSchedulerEnabled)
	}
	sc.PreemptionConfig.BatchSchedulerEnabled = true
	sc.PreemptionConfig.ServiceSchedulerEnabled = true
	w := (&api.WriteOptions{}).WithContext(ctx)
	set, _, err := client.Operator().SchedulerCASConfiguration(sc, w)
	if err != nil {
		return r, fmt.Errorf("turn on preemption for batch and service: %w (the token needs operator:write)", err)
	}
	if !set.Updated {
		return r, errors.New("turn on preemption: the scheduler configuration changed meanwhile; start again")
	}
	r.PreemptionEnabled = true
	return r, nil
}

// aclEnabled reads the agent's ACL setting. With ACLs off Nomad still answers
// /v1/acl/token/self, with an empty token, so the token cannot tell.
func aclEnabled(self *api.AgentSelf) bool {
	acl, _ := self.Config["ACL"].(map[string]any)
	on, _ := acl["Enabled"].(bool)
	return on
}

// checkToken reads the token when ACLs are on.
func checkToken(ctx context.Context, client *api.Client, r *PreflightReport) error {
	tok, _, err := client.ACLTokens().Self((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("read the ACL token: %w (set NOMAD_TOKEN to a token allot may use)", err)
	}
	r.ACLs = true
	r.Token = fmt.Sprintf("%s (%s)", tok.Name, tok.Type)
	r.Policies = tok.Policies
	if tok.Type != "management" && len(tok.Policies) == 0 && len(tok.Roles) == 0 {
		return errors.New("the ACL token has no policies: allot needs namespace list-jobs, read-job, submit-job and " +
			"alloc-lifecycle, node:write, agent:read and operator:read (operator:write with manage_scheduler_config); " +
			"examples/deploy/nomad-acl-policy.hcl is such a policy")
	}
	return nil
}

func agentVersion(self *api.AgentSelf) string {
	if self == nil {
		return ""
	}
	if v, ok := self.Config["Version"].(map[string]any); ok {
		ver, _ := v["Version"].(string)
		if pre, _ := v["VersionPrerelease"].(string); pre != "" && ver != "" {
			ver += "-" + pre
		}
		if ver != "" {
			return ver
		}
	}
	return self.Member.Tags["build"]
}

// majorMinor reads "X.Y" from the front of a version string.
func majorMinor(v string) (int, int) {
	var parts [2]int
	i := 0
	for _, c := range v {
		switch {
		case c >= '0' && c <= '9':
			parts[i] = parts[i]*10 + int(c-'0')
		case c == '.' && i == 0:
			i = 1
		default:
			return parts[0], parts[1]
		}
	}
	return parts[0], parts[1]
}
