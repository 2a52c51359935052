package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics is one server's Prometheus registry (not the global one, so that
// several servers can run in one process, as in tests).
type metrics struct {
	reg              *prometheus.Registry
	requests         *prometheus.CounterVec
	requestSeconds   *prometheus.HistogramVec
	writes           *prometheus.CounterVec
	reconciles       *prometheus.CounterVec
	reconcileSeconds prometheus.Histogram
	// collectors is everything reg exports, kept so that the names of
	// families without samples yet can be listed (familyNames).
	collectors []prometheus.Collector
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "allot_http_requests_total",
			Help: "HTTP requests by route and status code."}, []string{"route", "code"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "allot_http_request_duration_seconds",
			Help: "HTTP request latency by route.", Buckets: prometheus.DefBuckets}, []string{"route"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "allot_raft_writes_total",
			Help: "Entries this server committed through raft, by type and result (ok, rejected, raft_error)."}, []string{"type", "result"}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "allot_reconcile_passes_total",
			Help: "Reconcile passes run by this server while leader, by result."}, []string{"result"}),
		reconcileSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "allot_reconcile_duration_seconds",
			Help: "Duration of reconcile passes.", Buckets: prometheus.DefBuckets}),
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	raftStat := func(key string) func() float64 {
		return func() float64 {
			v, _ := strconv.ParseFloat(s.raft.Stats()[key], 64)
			return v
		}
	}
	m.collectors = append(m.collectors, m.requests, m.requestSeconds, m.writes, m.reconciles, m.reconcileSeconds,
		gauge("allot_raft_leader", "1 when this server is the raft leader.", func() float64 {
			if s.raft.State() == raft.Leader {
				return 1
			}
			return 0
		}),
		gauge("allot_raft_last_log_index", "Last raft log index on this server.", raftStat("last_log_index")),
		gauge("allot_raft_applied_index", "Last raft index applied to the state.", raftStat("applied_index")),
		gauge("allot_raft_peers", "Voters in the raft configuration.", raftStat("num_peers")),
		gauge("allot_managed_jobs", "Jobs allot manages.", func() float64 { return float64(len(s.fsm.Read().Jobs())) }),
		gauge("allot_queue_pending_jobs", "Pending jobs in the last plan.", func() float64 {
			n := 0
			for _, q := range s.fsm.Read().Queue() {
				if q.Position > 0 {
					n++
				}
			}
			return float64(n)
		}),
		gauge("allot_ledger_bytes", "Memory held by the usage and demand ledger.", func() float64 {
			var n int64
			s.fsm.WithLedger(func(l *budgets.Ledger) { n = l.SizeBytes() })
			return float64(n)
		}),
	)
	nodes := prometheus.NewDesc("allot_nodes", "GPU nodes by drain state.", []string{"drain"}, nil)
	m.collectors = append(m.collectors, newDrainCollector(s), &funcCollector{desc: nodes, collect: func(ch chan<- prometheus.Metric) {
		count := map[string]int{}
		for _, n := range s.fsm.Read().Nodes() {
			count[n.Drain.String()]++
		}
		for drain, c := range count {
			ch <- prometheus.MustNewConstMetric(nodes, prometheus.GaugeValue, float64(c), drain)
		}
	}})
	m.reg.MustRegister(m.collectors...)
	return m
}

// familyNames lists the name of every metric family the server exports,
// including those with no sample yet (a counter vector nobody incremented).
func (m *metrics) familyNames() []string {
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range m.collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	var names []string
	for d := range ch {
		names = append(names, descName(d))
	}
	return names
}

// descName reads a Desc's fully-qualified name from its String form, the
// only place client_golang exposes it: Desc{fqName: "x", ...}.
func descName(d *prometheus.Desc) string {
	s := d.String()
	_, rest, ok := strings.Cut(s, `fqName: "`)
	if !ok {
		return s
	}
	name, _, _ := strings.Cut(rest, `"`)
	return name
}

// funcCollector collects one labelled family computed at scrape time.
type funcCollector struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c *funcCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c *funcCollector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// statusRecorder remembers the status code written.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// instrument counts requests and measures their latency under route.
func (s *Server) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		s.metrics.requests.WithLabelValues(route, strconv.Itoa(rec.code)).Inc()
		s.metrics.requestSeconds.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}
