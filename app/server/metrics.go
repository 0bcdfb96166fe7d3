package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus series, on a registry of its own so
// that several servers (tests) do not collide in the global one.
type metrics struct {
	reg *prometheus.Registry

	requests     *prometheus.CounterVec // endpoint, status
	promptTokens prometheus.Counter
	genTokens    prometheus.Counter
	promptRate   prometheus.Histogram
	genRate      prometheus.Histogram
	queueDepth   prometheus.Gauge
	inFlight     prometheus.Gauge

	// The speculative engine will report these; they are registered now so
	// that dashboards can be built before it lands.
	specTau        prometheus.Gauge
	specAcceptance prometheus.Gauge
	draftVersion   prometheus.Gauge
}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	rateBuckets := prometheus.ExponentialBuckets(1, 2, 16) // 1 … 32768 tokens/s
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dovetail_http_requests_total",
			Help: "HTTP requests answered, by endpoint and status code (499: the client left before an answer).",
		}, []string{"endpoint", "status"}),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dovetail_prompt_tokens_total", Help: "Prompt tokens processed.",
		}),
		genTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dovetail_generated_tokens_total", Help: "Tokens generated.",
		}),
		promptRate: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "dovetail_prompt_tokens_per_second", Help: "Prefill speed of each request.", Buckets: rateBuckets,
		}),
		genRate: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "dovetail_generation_tokens_per_second", Help: "Generation speed of each request.", Buckets: rateBuckets,
		}),
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dovetail_queue_depth", Help: "Requests waiting for a generation slot.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dovetail_requests_in_flight", Help: "Requests holding a generation slot.",
		}),
		specTau: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dovetail_spec_tau", Help: "Mean tokens per speculative round (0: speculation off).",
		}),
		specAcceptance: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dovetail_spec_acceptance", Help: "Share of draft tokens the target accepted (0: speculation off).",
		}),
		draftVersion: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dovetail_draft_version", Help: "Version of the draft weights in use (0: none).",
		}),
	}
	reg.MustRegister(m.requests, m.promptTokens, m.genTokens, m.promptRate, m.genRate,
		m.queueDepth, m.inFlight, m.specTau, m.specAcceptance, m.draftVersion,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) request(endpoint string, status int) {
	m.requests.WithLabelValues(endpoint, strconv.Itoa(status)).Inc()
}

func (m *metrics) queue(waiting, running int) {
	m.queueDepth.Set(float64(waiting))
	m.inFlight.Set(float64(running))
}
