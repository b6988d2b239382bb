package server

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nesy-dev/nesy/decoder"
)

// metrics are the server's Prometheus collectors, registered on a registry
// the server owns (several servers can live in one process, as tests do).
// Names follow nesy_<subsystem>_<name>_<unit>; labels have small fixed value
// sets (route patterns, HTTP methods and status codes, planning methods,
// token kinds), never a task, a model path or a request id.
type metrics struct {
	requests  *prometheus.CounterVec   // route, method, code
	latency   *prometheus.HistogramVec // route, method, code
	inFlight  prometheus.Gauge
	tokens    *prometheus.CounterVec // kind: prompt, generated, evaluated
	calls     prometheus.Counter
	plans     *prometheus.CounterVec // method, outcome
	planSecs  *prometheus.HistogramVec
	mask      *maskHistogram
	sims      prometheus.Counter
	occupancy prometheus.Histogram
	queueWait prometheus.Histogram
	queued    prometheus.Gauge
	running   prometheus.Gauge
	rejected  *prometheus.CounterVec // reason
	panics    prometheus.Counter
}

// planOutcomes are the values of the outcome label of nesy_plan_requests_total.
var planOutcomes = []string{"goal", "no_goal", "invalid", "error", "cancelled"}

func newMetrics(reg *prometheus.Registry, engines func() []engineStats, gpus func() []gpuStat) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nesy_http_requests_total", Help: "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nesy_http_request_duration_seconds", Help: "Time from request to the end of the response (streams included).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1ms .. 262s
		}, []string{"route", "method", "code"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nesy_http_requests_in_flight", Help: "Requests being handled.",
		}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nesy_model_tokens_total", Help: "Tokens of served requests: prompt (prompt tokens evaluated), generated (kept in the answer), evaluated (every position any forward pass computed for the request, search included).",
		}, []string{"kind"}),
		calls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nesy_model_calls_total", Help: "Model evaluation calls made by served requests (each may share a forward pass with other requests).",
		}),
		plans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nesy_plan_requests_total", Help: "Plan requests that reached the planner, by method and outcome (goal, no_goal, invalid, error, cancelled).",
		}, []string{"method", "outcome"}),
		planSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nesy_plan_duration_seconds", Help: "Planner time of plan requests (queueing and loading excluded), by method.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 10), // 10ms .. 197s
		}, []string{"method"}),
		mask: &maskHistogram{},
		sims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nesy_mcts_simulations_total", Help: "MCTS simulations run by served requests.",
		}),
		occupancy: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nesy_mcts_batch_occupancy_ratio", Help: "Per search, the mean fraction of the leaf batch filled in each batched model call.",
			Buckets: prometheus.LinearBuckets(0.1, 0.1, 10),
		}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nesy_scheduler_queue_wait_seconds", Help: "Time admitted requests waited for a slot.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nesy_scheduler_queue_depth", Help: "Requests waiting for a slot.",
		}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nesy_scheduler_running_requests", Help: "Requests holding a slot (running on an engine).",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nesy_scheduler_rejected_total", Help: "Requests refused by admission, by reason (queue_full, queue_timeout, shutting_down, model_capacity).",
		}, []string{"reason"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nesy_http_panics_total", Help: "Handler panics recovered (each answered 500).",
		}),
	}
	for _, k := range []string{"prompt", "generated", "evaluated"} {
		m.tokens.WithLabelValues(k)
	}
	for _, r := range []string{CodeQueueFull, CodeQueueTimeout, CodeShuttingDown, CodeModelBusy} {
		m.rejected.WithLabelValues(r)
	}
	reg.MustRegister(m.requests, m.latency, m.inFlight, m.tokens, m.calls, m.plans, m.planSecs,
		m.mask, m.sims, m.occupancy, m.queueWait, m.queued, m.running, m.rejected, m.panics,
		&engineCollector{engines: engines}, &gpuCollector{gpus: gpus},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// engineStats are the running totals of one loaded engine.
type engineStats struct {
	evaluated, calls int64
	seqs, slots      int
	cells            int
}

// engineCollector reads the loaded engines' totals at scrape time, summed
// over engines (a model name is not a label).
type engineCollector struct {
	engines func() []engineStats
}

var (
	descLoaded    = prometheus.NewDesc("nesy_engine_loaded_models", "Models loaded (one engine each).", nil, nil)
	descSeqs      = prometheus.NewDesc("nesy_engine_kv_sequences_in_use", "KV-cache sequence slots in use, over all loaded engines.", nil, nil)
	descSlots     = prometheus.NewDesc("nesy_engine_kv_sequence_slots", "KV-cache sequence slots, over all loaded engines.", nil, nil)
	descCells     = prometheus.NewDesc("nesy_engine_kv_cache_cells", "KV-cache cells, over all loaded engines.", nil, nil)
	descEvaluated = prometheus.NewDesc("nesy_engine_evaluated_tokens_total", "Positions computed by forward passes of the loaded engines (warm-up excluded; resets when a model is unloaded).", nil, nil)
	descPasses    = prometheus.NewDesc("nesy_engine_forward_passes_total", "Forward passes run by the loaded engines; evaluated tokens per pass is the batch occupancy cross-request merging achieves.", nil, nil)
)

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLoaded, descSeqs, descSlots, descCells, descEvaluated, descPasses} {
		ch <- d
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	var sum engineStats
	es := c.engines()
	for _, e := range es {
		sum.evaluated += e.evaluated
		sum.calls += e.calls
		sum.seqs += e.seqs
		sum.slots += e.slots
		sum.cells += e.cells
	}
	ch <- prometheus.MustNewConstMetric(descLoaded, prometheus.GaugeValue, float64(len(es)))
	ch <- prometheus.MustNewConstMetric(descSeqs, prometheus.GaugeValue, float64(sum.seqs))
	ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(sum.slots))
	ch <- prometheus.MustNewConstMetric(descCells, prometheus.GaugeValue, float64(sum.cells))
	ch <- prometheus.MustNewConstMetric(descEvaluated, prometheus.CounterValue, float64(sum.evaluated))
	ch <- prometheus.MustNewConstMetric(descPasses, prometheus.CounterValue, float64(sum.calls))
}

// gpuStat is one GPU's state as the metrics show it.
type gpuStat struct {
	index       int
	utilization float64 // 0..1; < 0 when unknown
	memUsed     uint64
	memTotal    uint64
	tempC       float64 // < 0 when unknown
}

// gpuCollector exports GPU state read at scrape time; with no GPU (or no
// driver) it exports nothing.
type gpuCollector struct {
	gpus func() []gpuStat
}

var (
	descGPUUtil  = prometheus.NewDesc("nesy_gpu_utilization_ratio", "GPU busy fraction over the driver's last sample period.", []string{"gpu"}, nil)
	descGPUUsed  = prometheus.NewDesc("nesy_gpu_memory_used_bytes", "GPU memory in use.", []string{"gpu"}, nil)
	descGPUTotal = prometheus.NewDesc("nesy_gpu_memory_total_bytes", "GPU memory.", []string{"gpu"}, nil)
	descGPUTemp  = prometheus.NewDesc("nesy_gpu_temperature_celsius", "GPU core temperature.", []string{"gpu"}, nil)
)

func (c *gpuCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGPUUtil, descGPUUsed, descGPUTotal, descGPUTemp} {
		ch <- d
	}
}

func (c *gpuCollector) Collect(ch chan<- prometheus.Metric) {
	if c.gpus == nil {
		return
	}
	for _, g := range c.gpus() {
		i := strconv.Itoa(g.index)
		if g.utilization >= 0 {
			ch <- prometheus.MustNewConstMetric(descGPUUtil, prometheus.GaugeValue, g.utilization, i)
		}
		if g.memTotal > 0 {
			ch <- prometheus.MustNewConstMetric(descGPUUsed, prometheus.GaugeValue, float64(g.memUsed), i)
			ch <- prometheus.MustNewConstMetric(descGPUTotal, prometheus.GaugeValue, float64(g.memTotal), i)
		}
		if g.tempC >= 0 {
			ch <- prometheus.MustNewConstMetric(descGPUTemp, prometheus.GaugeValue, g.tempC, i)
		}
	}
}

// maskHistogram is the latency histogram of constrained-decoding masks.
// The decoder reports each decode's mask times already bucketed
// (decoder.Result.MaskHistogram over decoder.MaskBuckets, with their exact
// sum), so the histogram is kept here and exported as a constant histogram
// with those buckets.
type maskHistogram struct {
	mu     sync.Mutex // protects the fields below
	counts [len(decoder.MaskBuckets) + 1]uint64
	sum    float64
}

var descMask = prometheus.NewDesc("nesy_decoder_mask_duration_seconds",
	"Time to compute one constrained-decoding step's allowed tokens and advance the plan cursor.", nil, nil)

func (m *metrics) observeMask(res *decoder.Result) {
	if res.MaskSteps == 0 {
		return
	}
	h := m.mask
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, n := range res.MaskHistogram {
		h.counts[i] += uint64(n)
	}
	h.sum += res.MaskSeconds
}

func (h *maskHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- descMask }

func (h *maskHistogram) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	defer h.mu.Unlock()
	buckets := make(map[float64]uint64, len(decoder.MaskBuckets))
	var cum uint64
	for i, b := range decoder.MaskBuckets {
		cum += h.counts[i]
		buckets[b.Seconds()] = cum
	}
	cum += h.counts[len(decoder.MaskBuckets)]
	ch <- prometheus.MustNewConstHistogram(descMask, cum, h.sum, buckets)
}
