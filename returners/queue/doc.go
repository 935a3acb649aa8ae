// Package queue is the master's returner queue: a returners.Store in one
// bbolt file per returner under the master's cachedir, durable across
// restarts and bounded. It is kept apart from package returners so that
// the agent, which runs its light returners on a bbolt-free Spool, does
// not link bbolt.
package queue
