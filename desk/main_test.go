package desk_test

import (
	"testing"

	"github.com/helpdesk-dev/helpdesk/store/storetest"
)

// TestMain reuses the tests' schemas, emptied, and drops them at the end.
func TestMain(m *testing.M) { storetest.Main(m) }
