# clients/go: the Go client (module fenced/client, standard library only;
# docs/go.md). tests/integration/test_go_client.sh runs gofmt, go vet and
# go test -v against this build's fenced and fence-store, with the Go caches
# under $(BUILD)/go. `make go-test` is the same, alone.
INTEG_TESTS += tests/integration/test_go_client.sh

go-test: $(BUILD)/fenced $(BUILD)/fence-store $(BUILD)/fencectl
	@bash tests/run.sh tests/integration/test_go_client.sh

.PHONY: go-test
