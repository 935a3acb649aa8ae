// Package targets parses and matches Salt target expressions (glob, pcre,
// list, grain, grain_pcre, pillar, pillar_pcre, pillar_exact, ipcidr,
// compound, nodegroup). The master uses it to compute the minions a job
// expects, the relay to fan a job out to its devices, and the agent to refuse
// a job that is not for it: all three run the same code. It imports nothing
// of ours.
//
// Compile parses an expression once into a Matcher, which matches a Minion
// (id, grains, pillar) without allocating. Nodegroups are expanded at
// compile time; Matcher.String gives the expanded target as one compound
// expression, which is what a relay or agent needs.
//
// A Fleet indexes many minions' grains by value (the master keeps one of
// every minion it knows) and selects the minions a Matcher matches with
// bitset operations instead of matching each minion; the result is the
// same as Matcher.Match on each.
//
// Semantics follow Salt 3006: glob is fnmatch on the id (case-sensitive);
// pcre is re.match (anchored at the start only); grain and pillar matching is
// salt.utils.data.subdict_match (nested keys, list elements, both sides
// lowercased); ipcidr tests the ipv4/ipv6 grains; compound splits on
// whitespace with Python's precedence of not, and, or. Where Salt would log an
// error and match nothing (a malformed regular expression, "web* db*", an
// unknown nodegroup, a network with host bits set), Compile returns a
// *SyntaxError naming the position and what was expected.
package targets
