package nomad

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// WatchConfig tunes the Watcher. Zero values take the defaults below.
type WatchConfig struct {
	// Namespace to watch; "*" (the default) watches all of them.
	Namespace string
	// ConfirmTimeout bounds how long a resumed stream may take to replay the
	// last frame seen. Nomad resumes at the closest index it still buffers
	// without saying so (stream.eventBuffer.StartAtClosest), so the replayed
	// frame is the only proof that nothing was skipped; without it the view
	// is rebuilt from the list endpoints.
	ConfirmTimeout time.Duration
	// ResyncInterval rebuilds the view from the list endpoints periodically
	// (allocations garbage-collected by Nomad send no event). Negative
	// disables it.
	ResyncInterval time.Duration
	// RetryMin and RetryMax bound the exponential backoff after errors.
	RetryMin, RetryMax time.Duration
}

func (c WatchConfig) withDefaults() WatchConfig {
	if c.Namespace == "" {
		c.Namespace = "*"
	}
	if c.ConfirmTimeout <= 0 {
		c.ConfirmTimeout = 2 * time.Second
	}
	if c.ResyncInterval == 0 {
		c.ResyncInterval = 5 * time.Minute
	}
	if c.RetryMin <= 0 {
		c.RetryMin = 250 * time.Millisecond
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 30 * time.Second
	}
	return c
}

// Watcher keeps a View in step with Nomad through the event stream, and
// rebuilds it from the list endpoints at start, after a gap, a dropped stream
// that cannot be resumed exactly, a server restart, and periodically.
// Run it in its own goroutine; it only reads from Nomad and never waits on
// the reconcile loop (the View's notifications are coalesced and never block).
type Watcher struct {
	client   *api.Client
	view     *View
	cfg      WatchConfig
	log      hclog.Logger
	resyncCh chan struct{}
	resyncs  atomic.Uint64
	frames   atomic.Uint64
}

// NewWatcher returns a watcher feeding view from client.
func NewWatcher(client *api.Client, view *View, cfg WatchConfig, log hclog.Logger) *Watcher {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Watcher{
		client: client, view: view, cfg: cfg.withDefaults(), log: log.Named("watch"),
		resyncCh: make(chan struct{}, 1),
	}
}

// Resyncs counts the rebuilds from the list endpoints so far.
func (w *Watcher) Resyncs() uint64 { return w.resyncs.Load() }

// Frames counts the event frames applied so far.
func (w *Watcher) Frames() uint64 { return w.frames.Load() }

// RequestResync asks for a rebuild from the list endpoints (for example the
// reconcile loop's periodic full resync). It never blocks.
func (w *Watcher) RequestResync() {
	select {
	case w.resyncCh <- struct{}{}:
	default:
	}
}

// errGap ends a stream whose continuity could not be proven.
var errGap = errors.New("event stream gap")

// Run watches until ctx ends, then returns ctx's error.
func (w *Watcher) Run(ctx context.Context) error {
	var (
		last      uint64 // index the view reflects
		fromFrame bool   // last came from a received frame (it can be replayed)
		resync    = true
		backoff   = w.cfg.RetryMin
	)
	for ctx.Err() == nil {
		if resync {
			idx, err := w.resync(ctx)
			if err != nil {
				w.log.Warn("rebuild from list endpoints failed", "error", err, "retry_in", backoff)
				backoff = w.sleep(ctx, backoff)
				continue
			}
			last, fromFrame, resync = idx, false, false
		}
		newLast, gotFrame, err := w.stream(ctx, last, fromFrame)
		if gotFrame {
			last, fromFrame = newLast, true
			backoff = w.cfg.RetryMin
		}
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, errResyncRequested):
			resync = true
		case errors.Is(err, errGap):
			w.log.Info("event stream resumed with a gap; rebuilding from list endpoints", "last_index", last)
			resync = true
		default:
			// A dropped stream resumes from the last frame when it can be
			// replayed; otherwise only a rebuild is sure to miss nothing.
			resync = !fromFrame
			w.log.Warn("event stream dropped", "error", err, "last_index", last, "retry_in", backoff)
			backoff = w.sleep(ctx, backoff)
		}
	}
	return ctx.Err()
}

var errResyncRequested = errors.New("resync requested")

func (w *Watcher) sleep(ctx context.Context, d time.Duration) time.Duration {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return min(2*d, w.cfg.RetryMax)
}

// stream consumes one subscription from index from. When confirm is set,
// the first frame must be the replay of frame from. It returns the index of
// the last frame applied and whether any frame was applied.
func (w *Watcher) stream(ctx context.Context, from uint64, confirm bool) (uint64, bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := w.client.EventStream().Stream(ctx, watchTopics, from, &api.QueryOptions{Namespace: w.cfg.Namespace})
	if err != nil {
		return from, false, fmt.Errorf("subscribe at index %d: %w", from, err)
	}
	var confirmC <-chan time.Time
	if confirm {
		t := time.NewTimer(w.cfg.ConfirmTimeout)
		defer t.Stop()
		confirmC = t.C
	}
	var resyncC <-chan time.Time
	if w.cfg.ResyncInterval > 0 {
		t := time.NewTimer(w.cfg.ResyncInterval)
		defer t.Stop()
		resyncC = t.C
	}
	last, got := from, false
	for {
		select {
		case <-ctx.Done():
			return last, got, ctx.Err()
		case <-confirmC:
			return last, got, fmt.Errorf("%w: frame %d not replayed within %s", errGap, from, w.cfg.ConfirmTimeout)
		case <-resyncC:
			return last, got, errResyncRequested
		case <-w.resyncCh:
			return last, got, errResyncRequested
		case evs, ok := <-ch:
			if !ok {
				return last, got, errors.New("event stream closed")
			}
			if evs.Err != nil {
				return last, got, evs.Err
			}
			if confirmC != nil {
				confirmC = nil
				if evs.Index != from {
					return last, got, fmt.Errorf("%w: resumed at index %d, want replay of %d", errGap, evs.Index, from)
				}
				continue // the replayed frame is already in the view
			}
			if err := w.applyFrame(evs); err != nil {
				return last, got, err
			}
			last, got = evs.Index, true
		}
	}
}

func (w *Watcher) applyFrame(evs *api.Events) error {
	c, err := changeFromEvents(evs, w.fetchJob)
	if err != nil {
		return err
	}
	w.view.apply(c)
	w.frames.Add(1)
	return nil
}

// fetchJob is the job cache's miss path: the view first, then Nomad. A job
// that no longer exists yields nil (its allocations keep their own GPUs).
func (w *Watcher) fetchJob(k JobKey) (*Job, error) {
	if j, ok := w.view.Job(k); ok {
		return &j, nil
	}
	j, _, err := w.client.Jobs().Info(k.ID, &api.QueryOptions{Namespace: k.Namespace})
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	out := jobFromAPI(j)
	return &out, nil
}

func isNotFound(err error) bool {
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) {
		return ue.StatusCode() == 404
	}
	// Some endpoints answer with a plain error naming the code.
	return strings.Contains(err.Error(), "Unexpected response code: 404")
}
