package nomad

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// readFrames decodes a captured event stream the way api.EventStream does:
// one JSON frame after another into api.Events, payloads left as maps.
func readFrames(t *testing.T, path string) []*api.Events {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*api.Events
	dec := json.NewDecoder(bufio.NewReader(f))
	for dec.More() {
		var evs api.Events
		if err := dec.Decode(&evs); err != nil {
			t.Fatalf("%s: frame %d: %v", path, len(out)+1, err)
		}
		if !evs.IsHeartbeat() {
			out = append(out, &evs)
		}
	}
	return out
}

func noJobs(k JobKey) (*Job, error) { return nil, fmt.Errorf("node frames ask no job, asked %s", k) }

// nodesByIndex runs every frame of a capture through changeFromEvents and
// keeps the node each NodeDrain frame put into the view, by frame index.
func nodesByIndex(t *testing.T, path string) map[uint64]*Node {
	t.Helper()
	out := map[uint64]*Node{}
	for _, f := range readFrames(t, path) {
		c, err := changeFromEvents(f, noJobs)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for i, n := range c.putNodes {
			if f.Events[i].Type == "NodeDrain" {
				out[f.Index] = n
			}
		}
	}
	return out
}

// The captures under testdata come from a real Nomad 2.0.6-dev agent
// (nomad agent -dev, one raw_exec batch allocation running on its node):
//
//	nomad node drain -enable -deadline 5m -yes -detach <id>   (index 19)
//	nomad node drain -disable -yes <id>                         (index 20)
//	nomad node drain -enable -no-deadline -yes -detach <id>    (index 23)
//	nomad node drain -enable -force -ignore-system -yes ...    (index 24)
//	the forced drain completes                                  (index 26)
//
// with GET /v1/event/stream?topic=Node captured by curl, and
// GET /v1/node/<id> read while the 5m drain ran (node-draining.json).
func TestNodeDrainFromCapturedEvents(t *testing.T) {
	started := time.Date(2026, 11, 30, 0, 47, 42, 799257822, time.UTC)
	restarted := time.Date(2026, 11, 30, 0, 47, 51, 247095220, time.UTC)
	nodes := nodesByIndex(t, "testdata/events-node-drain-deadline.ndjson")
	for k, v := range nodesByIndex(t, "testdata/events-node-drain-nodeadline-force.ndjson") {
		nodes[k] = v
	}
	tests := []struct {
		index        uint64
		what         string
		wantDrain    *Drain
		wantEligible bool
	}{
		{19, "-deadline 5m: Deadline 3e+11 ns, ForceDeadline five minutes after StartedAt",
			&Drain{StartedAt: started, Deadline: started.Add(5 * time.Minute)}, false},
		{20, "-disable: no strategy, eligible again", nil, true},
		{23, "-no-deadline: Deadline 0, ForceDeadline null", &Drain{StartedAt: restarted}, false},
		{24, "-force -ignore-system: Deadline -1s", &Drain{StartedAt: restarted, Force: true, IgnoreSystemJobs: true}, false},
		{26, "forced drain complete: no strategy, still ineligible", nil, false},
	}
	for _, tt := range tests {
		n, ok := nodes[tt.index]
		if !ok {
			t.Errorf("index %d (%s): no NodeDrain event in the captures", tt.index, tt.what)
			continue
		}
		if !reflect.DeepEqual(n.Drain, tt.wantDrain) || n.Eligible != tt.wantEligible {
			t.Errorf("index %d (%s):\n got drain %+v eligible %v\nwant drain %+v eligible %v",
				tt.index, tt.what, n.Drain, n.Eligible, tt.wantDrain, tt.wantEligible)
		}
	}

	// The view built from the event and the one built from GET /v1/node/<id>
	// (the list path reads draining nodes in full) must be the same node.
	raw, err := os.ReadFile("testdata/node-draining.json")
	if err != nil {
		t.Fatal(err)
	}
	var info api.Node
	if err := json.Unmarshal(raw, &info); err != nil {
		t.Fatal(err)
	}
	if fromInfo := nodeFromAPI(&info); nodes[19] == nil || !reflect.DeepEqual(*nodes[19], fromInfo) {
		t.Errorf("node from the NodeDrain event differs from GET /v1/node/<id>:\n event %+v\n  info %+v", nodes[19], fromInfo)
	}
}

func TestNodeDrainDeadlineFromDurationOnly(t *testing.T) {
	// A strategy that carries the duration but no ForceDeadline still has
	// an absolute deadline: StartedAt + Deadline.
	started := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	n := nodeFromAPI(&api.Node{ID: "n", DrainStrategy: &api.DrainStrategy{
		DrainSpec: api.DrainSpec{Deadline: 5 * time.Minute}, StartedAt: started,
	}})
	if want := started.Add(5 * time.Minute); n.Drain == nil || !n.Drain.Deadline.Equal(want) || n.Drain.Force {
		t.Errorf("drain = %+v, want deadline %v, not forced", n.Drain, want)
	}
}

func TestPayloadObjectMissing(t *testing.T) {
	ev := &api.Event{Topic: api.TopicNode, Type: "NodeDrain", Key: "n", Payload: map[string]any{"Node": nil}}
	if _, err := changeFromEvents(&api.Events{Index: 1, Events: []api.Event{*ev}}, noJobs); err == nil {
		t.Error("a NodeDrain event with a null node was accepted; want an error naming the payload")
	}
	ev.Payload = map[string]any{"Node": map[string]any{"ID": "n", "ModifyIndex": "not a number"}}
	if _, err := changeFromEvents(&api.Events{Index: 1, Events: []api.Event{*ev}}, noJobs); err == nil {
		t.Error("a node whose ModifyIndex is a string was accepted; want a decoding error")
	}
}
