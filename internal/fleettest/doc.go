// Package fleettest runs several gateways, guard workers, NATS and
// PostgreSQL together on the testbed and breaks them mid-run: a worker
// dies, NATS stops and returns, PostgreSQL restarts. It has only tests.
package fleettest
