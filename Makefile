# Developer shortcuts; CI runs .ci/run.
.PHONY: test bench bench-go check

test:
	go test ./...

# The performance table of docs/PERFORMANCE.md: every figure against its baseline, measured
# side by side (medians of interleaved repeats). Takes several minutes.
bench:
	SOUS_BENCH_TABLE=1 go test ./bench -run TestTable -v -count=1 -timeout 60m

# The Go benchmarks of the hot paths (frames, replay, stdin, ping), once each.
bench-go:
	go test -run '^$$' -bench . -benchmem ./...

check:
	.ci/run
