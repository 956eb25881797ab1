/// The optimal-string-alignment edit distance between two strings: the number of
/// single-character insertions, deletions, substitutions and swaps of two adjacent
/// characters needed to turn one into the other. Counting a swap as one edit makes
/// the common typo "bukcet" → "bucket" distance 1 instead of 2.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    // Three rolling rows: the one before the previous is needed for swaps.
    var beforePrevious = [Int](repeating: 0, count: b.count + 1)
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            let cost = a[i - 1] == b[j - 1] ? 0 : 1
            var best = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                best = min(best, beforePrevious[j - 2] + 1)
            }
            current[j] = best
        }
        (beforePrevious, previous, current) = (previous, current, beforePrevious)
    }
    return previous[b.count]
}

/// The candidate closest to `word`, if it is close enough to be a plausible typo:
/// at most max(2, length/3) edits, and fewer edits than the shorter word has
/// characters (so "to" is never "corrected" to "id"). Ties go to the earlier candidate.
/// Failing that, the only candidate that starts with `word` (at least 3 characters),
/// so that an abbreviation such as "warn" finds "warning".
public func closestMatch(to word: String, in candidates: [String]) -> String? {
    var best: (candidate: String, distance: Int)?
    for candidate in candidates where candidate != word {
        let distance = editDistance(word, candidate)
        let limit = max(2, word.count / 3)
        guard distance <= limit, distance < min(word.count, candidate.count) else { continue }
        if let current = best, current.distance <= distance { continue }
        best = (candidate, distance)
    }
    if let best { return best.candidate }
    let extensions = candidates.filter { $0 != word && $0.hasPrefix(word) }
    return word.count >= 3 && extensions.count == 1 ? extensions[0] : nil
}
