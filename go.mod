module github.com/seqbus/seqbus

go 1.26.0

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0
	github.com/pierrec/lz4/v4 v4.1.33
	go.uber.org/goleak v1.3.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
	pgregory.net/rapid v1.3.0
)
