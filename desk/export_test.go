package desk

import "github.com/helpdesk-dev/helpdesk/store"

// CombineDeliveries gives d a combiner of deliveries' writes of its own
// shape, and returns it, for a test to hold its groups.
func (d *Desk) CombineDeliveries(groups, size int) *store.Combiner {
	d.deliveries = store.NewCombiner(d.pool, groups, size)
	return d.deliveries
}
