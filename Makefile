# The two commands of the README: `make run` and `make test`. Both find a
# PostgreSQL through cmd/withdb: $DATABASE_URL, else localhost:5432, else a
# throwaway cluster from the machine's PostgreSQL binaries.

WITHDB := go run ./cmd/withdb

.PHONY: run test lint unit bench build

## run: migrate a database named helpdesk and serve the API on 127.0.0.1:8080
run: build
	$(WITHDB) -db helpdesk -- sh -c './bin/helpdesk migrate && exec ./bin/helpdesk serve'

## test: go vet, the gofmt check and every test with the race detector
test: lint unit

lint:
	go vet ./...
	@files=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')) || exit 1; \
	if [ -n "$$files" ]; then echo "gofmt would change:"; echo "$$files"; exit 1; fi; \
	echo "gofmt: all files formatted"

unit:
	$(WITHDB) -db helpdesk_test -- go test -race -count=1 -timeout 15m ./...

## bench: the benchmarks, against the same database as the tests
bench:
	$(WITHDB) -db helpdesk_test -- go test -run '^$$' -bench . -benchtime 2s ./...

build:
	go build -o bin/helpdesk ./cmd/helpdesk
