// Package httpengine holds the built-in engines that speak HTTP: webhook
// (HTTP POSTs become events), http_forward (events to an HTTP endpoint, in
// batches) and metrics (beacon and bus figures as a Prometheus endpoint,
// and pushed to a StatsD or DogStatsD address). They register themselves
// with package engines. The master links them; the default agent does not
// (net/http costs about 0.7 MiB on armv7), an agent built with
// -tags engines does.
package httpengine
