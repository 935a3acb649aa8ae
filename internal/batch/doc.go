// Package batch is Salt's rolling batch (salt/cli/batch.py Batch.run),
// shared by the halite CLI (-b/--batch-size) and the master's orchestrate
// (salt.state and salt.function with batch:): the batch size as N or N%
// of the minions, a rolling window in which a slot frees batch_wait after
// its minion returned, failhard (stop at the first bad return, as Salt's
// --failhard in a batch), and a share-based stop that Salt does not have,
// max_fail (stop starting minions once more than N, or N%, have failed).
//
// It knows nothing of the master's API: the caller starts each batch's job
// and reports its returns through the functions it gives Run.
package batch
