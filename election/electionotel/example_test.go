package electionotel_test

import (
	"context"
	"fmt"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionotel"
)

// A candidate's metrics through the OpenTelemetry SDK. In a service, the
// MeterProvider has the exporter of your choice (OTLP, Prometheus) and the
// Metrics goes into election.Config.Metrics; here an in-memory reader
// collects what a candidate reports when it is elected.
func ExampleNewMetrics() {
	reader := sdkmetric.NewManualReader() // in a service: sdkmetric.NewPeriodicReader(otlpExporter)
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	metrics, err := electionotel.NewMetrics(provider)
	if err != nil {
		panic(err)
	}
	cfg := election.Config{Name: "billing", LeaseDuration: 15 * time.Second, Metrics: metrics}
	// election.NewTable(db, cfg) would call these from its campaign.
	stop := cfg.Metrics.Start(cfg, func() election.Progress {
		now := time.Now()
		return election.Progress{Now: now, Leading: true, Term: 7, LastRenewal: now, LastStep: now}
	})
	defer stop()
	cfg.Metrics.Elected("billing", 7)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Gauge[int64]:
			fmt.Println(m.Name, d.DataPoints[0].Value)
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				if reason, _ := p.Attributes.Value(electionotel.AttrReason); reason.AsString() == "elected" {
					fmt.Println(m.Name, "elected", p.Value)
				}
			}
		}
	}
	// Unordered output:
	// sqlelect.leadership.changes elected 1
	// sqlelect.leader 1
	// sqlelect.term 7
	// sqlelect.wedged 0
}
