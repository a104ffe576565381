# The commands of the README: `make demo` (or `make run`) and `make test`. They find a
# PostgreSQL through cmd/withdb: $DATABASE_URL, else localhost:5432, else a
# throwaway cluster from the machine's PostgreSQL binaries.

WITHDB := go run ./cmd/withdb
# The demo, the burst and the crash hooks they use are built only with this tag:
# the production binary (make build) has none of them.
DEMO := -tags demo
# The version a packager expects: the tag (v1.2.3) when there is one, else a Go
# pseudo-version of the commit (v0.0.0-20261201120314-798f038ac46b), -dirty with changes.
VERSION := $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || \
	TZ=UTC git log -1 --format='v0.0.0-%cd-%h' --date=format-local:%Y%m%d%H%M%S --abbrev=12 2>/dev/null || echo devel)

.PHONY: demo run test lint unit bench bench-floors bench-growth build build-demo faults burst docs browser screenshots

## demo: both kinds of duplicate made harmless, on a scratch database
demo: build-demo
	$(WITHDB) -- ./bin/helpdesk-demo demo

## run: the whole loop on this machine: a database named helpdesk with the demo's customers and agents, the API on
## 127.0.0.1:8080, inbound mail on 127.0.0.1:2525, mail out captured in ./captured-mail (deploy/dev.env)
run: build
	$(WITHDB) -db helpdesk -- sh -c 'set -a && . deploy/dev.env && set +a && ./bin/helpdesk migrate && ./bin/helpdesk load && exec ./bin/helpdesk serve'

## test: go vet, the gofmt check and every test with the race detector
test: lint unit

lint:
	go vet $(DEMO) ./...
	go vet -tags browser ./console
	@files=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')) || exit 1; \
	if [ -n "$$files" ]; then echo "gofmt would change:"; echo "$$files"; exit 1; fi; \
	echo "gofmt: all files formatted"

# The fault suite (faulttest/) runs the built binary as separate processes and
# waits out real timeouts (an SLA minute, River's rescue): it is `make faults`,
# which CI runs too. The memory tests read the process's heap and parse tens of
# MiB, which the race detector slows tenfold: they run without it (they are
# built only then).
unit: build
	HELPDESK_BIN=$(CURDIR)/bin/helpdesk $(WITHDB) -db helpdesk_test -- go test $(DEMO) -race -count=1 -timeout 15m $$(go list ./... | grep -v /faulttest$$)
	$(WITHDB) -db helpdesk_test -- go test -count=1 -run Memory ./inbound

## browser: the agent console in a real Chromium (Debian's chromium; HELPDESK_CHROMIUM names another)
browser:
	$(WITHDB) -db helpdesk_test -- go test -tags browser -race -count=1 -run TestBrowser -v ./console

## screenshots: docs/console-queue.png and docs/console-ticket.png, from the browser test
screenshots:
	HELPDESK_SCREENSHOTS=$(CURDIR)/docs $(WITHDB) -db helpdesk_test -- go test -tags browser -count=1 -run TestBrowserAgentAnswersFromTheConsole ./console

## faults: the fault suite against the built binary (COUNT=3 runs it three times in a row)
COUNT ?= 1
faults: build
	HELPDESK_BIN=$(CURDIR)/bin/helpdesk $(WITHDB) -db helpdesk_test -- go test -count=$(COUNT) -timeout 20m -v ./faulttest

## bench: the benchmarks, against the same database as the tests (the growth benchmarks are bench-growth's)
bench:
	$(WITHDB) -db helpdesk_test -- go test $(DEMO) -run '^$$' -bench . -skip AtAMillion -benchtime 2s ./...

## bench-floors: each path beside its floor, in turns, six times (about 15 minutes), and benchstat's median of
## of_floor (what ships ÷ the floor run just before it) with its 95 % interval: on a noisy machine one run of make
## bench can say 0.44 where the next says 0.77. Each turn is a run of its own: with -count, Go runs each benchmark
## its six times before the next. BASE=commit alternates that commit's benchmarks with the working tree's in each
## turn and compares the two (twice as long). FLOORS_COUNT=n runs n turns; the runs are kept in bin/floors/*.txt
FLOORS_COUNT ?= 6
FLOORS_JOBS := (TriageAsShipped|EmailThroughput)/^(FloorThreeCallsThreeCommits|Shipped|ShippedAssigningOneTeam|FloorTwoCommitsAroundASendAsShipped|WholePathAsShipped)$$
FLOORS_API := CreateTicket/^(FloorHTTPAndFourInsertsInOneRoundTrip|NewKeys)$$
FLOORS_BASE := $(or $(TMPDIR),/tmp)/helpdesk-bench-floors-base
bench-floors:
	rm -rf bin/floors "$(FLOORS_BASE)" && mkdir -p bin/floors/head
	go test -c -o bin/floors/head/ ./jobs ./api
	if [ -n "$(BASE)" ]; then \
		mkdir -p "$(FLOORS_BASE)" bin/floors/base && git archive "$(BASE)" | tar -x -C "$(FLOORS_BASE)" && \
		(cd "$(FLOORS_BASE)" && go test -c -o "$(CURDIR)/bin/floors/base/" ./jobs ./api) || exit 1; \
	fi
	$(WITHDB) -db helpdesk_test -- sh -c 'turn() { \
			(cd "$$1/jobs" && "$$2/jobs.test" -test.run "^$$" -test.benchtime 1s -test.bench "$(FLOORS_JOBS)") >> "$$2.txt" && \
			(cd "$$1/api" && "$$2/api.test" -test.run "^$$" -test.benchtime 1s -test.bench "$(FLOORS_API)") >> "$$2.txt"; }; \
		for i in $$(seq $(FLOORS_COUNT)); do \
			if [ -n "$(BASE)" ]; then turn "$(FLOORS_BASE)" "$(CURDIR)/bin/floors/base" || exit 1; fi; \
			turn "$(CURDIR)" "$(CURDIR)/bin/floors/head" || exit 1; \
		done'
	rm -rf "$(FLOORS_BASE)"
	go tool benchstat -filter '.unit:(of_floor OR of_floor_cpu)' bin/floors/head.txt
	if [ -n "$(BASE)" ]; then go tool benchstat -filter '.unit:(of_floor OR of_floor_cpu)' \
		base=bin/floors/base.txt head=bin/floors/head.txt; fi

## bench-growth: intake, triage and the console's queue pages with a million tickets and messages stored, against an empty database, in
## turns (the template database is filled once, about a minute and a half, 1.4 GB, and copied for each run); the similar-ticket lookup
## over a million vectors (1.5 GiB, and a minute of exact scans for its recall)
bench-growth:
	$(WITHDB) -db helpdesk_test -- go test -run '^$$' -bench AtAMillion -benchtime 1x -p 1 -timeout 30m ./api ./jobs ./console
	go test -run '^$$' -bench AtAMillion -benchtime 2s ./vectors

## burst: the burst, 10× time-scaled (about 70 seconds); writes docs/burst.txt and docs/burst.png
burst: build-demo
	mkdir -p docs
	$(WITHDB) -- ./bin/helpdesk-demo burst -chart docs/burst.png | tee docs/burst.txt

## build: the production binary, bin/helpdesk, with the version stamped
build:
	go build -buildvcs=auto -ldflags "-X main.version=$(VERSION)" -o bin/helpdesk ./cmd/helpdesk

## build-demo: bin/helpdesk-demo, the binary with the demo and the burst
build-demo:
	go build $(DEMO) -buildvcs=auto -o bin/helpdesk-demo ./cmd/helpdesk

## docs: docs/configuration.md, generated from the settings' declarations
docs:
	go test ./cmd/helpdesk -run TestConfigurationReference -update
