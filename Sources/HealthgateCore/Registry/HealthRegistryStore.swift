// Parses TypeRegistryData.text once. A row that breaks a rule is left out and described in `problems`; the tests
// require `problems` to be empty, so a bad edit of the data file fails `swift test` rather than crashing a server.

struct HealthRegistryContents: Sendable {
    var types: [HealthType] = []
    var workouts: [WorkoutActivity] = []
    var characteristics: [Characteristic] = []
    var valueSets: [String: [CategoryValue]] = [:]
    var problems: [String] = []
}

enum HealthRegistryStore {
    static let contents: HealthRegistryContents = parse(TypeRegistryData.text)

    /// `^[a-z][a-z0-9_]{1,63}$`
    static func isValidName(_ name: String) -> Bool {
        let scalars = Array(name.unicodeScalars)
        guard scalars.count >= 2, scalars.count <= 64, let first = scalars.first,
            first.value >= 97, first.value <= 122
        else { return false }
        return scalars.allSatisfy { scalar in
            (scalar.value >= 97 && scalar.value <= 122) || (scalar.value >= 48 && scalar.value <= 57) || scalar == "_"
        }
    }

    static func parse(_ text: String) -> HealthRegistryContents {
        var result = HealthRegistryContents()
        var rows: [(line: Int, fields: [String])] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = HealthUnitTable.trimmed(String(rawLine))
            if line.isEmpty || line.hasPrefix("#") { continue }
            let fields = line.split(separator: "|", omittingEmptySubsequences: false)
                .map { HealthUnitTable.trimmed(String($0)) }
            rows.append((index + 1, fields))
        }

        // Value sets first, so that rows may name a set defined anywhere in the file.
        for row in rows where row.fields.first == "values" {
            let problem = { (message: String) in result.problems.append("line \(row.line): \(message)") }
            guard row.fields.count == 3 else { problem("a values row has 3 fields"); continue }
            let setName = row.fields[1]
            guard result.valueSets[setName] == nil else { problem("value set \(setName) defined twice"); continue }
            var values: [CategoryValue] = []
            for token in row.fields[2].split(separator: " ") {
                guard let equals = token.lastIndex(of: "="),
                    let code = Int(token[token.index(after: equals)...])
                else {
                    problem("value \(token) is not name=code")
                    continue
                }
                let names = token[..<equals].split(separator: "/").map(String.init)
                guard let name = names.first, isValidValueName(name) else {
                    problem("value \(token) has a bad name")
                    continue
                }
                if values.contains(where: { $0.code == code }) { problem("code \(code) twice in \(setName)") }
                values.append(CategoryValue(name: name, code: code, aliases: Array(names.dropFirst())))
            }
            if values.isEmpty { problem("value set \(setName) is empty") }
            result.valueSets[setName] = values
        }

        for row in rows {
            let problem = { (message: String) in result.problems.append("line \(row.line): \(message)") }
            switch row.fields.first {
            case "values":
                continue
            case "quantity", "category":
                switch parseType(row.fields, valueSets: result.valueSets) {
                case .success(let type): result.types.append(type)
                case .failure(let failure): problem(failure.message)
                }
            case "workout":
                guard row.fields.count == 4, let rawValue = Int(row.fields[1]),
                    isValidName(row.fields[2]), !row.fields[3].isEmpty
                else {
                    problem("a workout row is `workout | raw value | name | HAE name`")
                    continue
                }
                result.workouts.append(WorkoutActivity(name: row.fields[2], rawValue: rawValue, haeName: row.fields[3]))
            case "characteristic":
                guard row.fields.count == 3, isValidName(row.fields[1]) else {
                    problem("a characteristic row is `characteristic | name | value set`")
                    continue
                }
                var values: [CategoryValue] = []
                if row.fields[2] != "-" {
                    guard let set = result.valueSets[row.fields[2]] else {
                        problem("unknown value set \(row.fields[2])")
                        continue
                    }
                    values = set
                }
                result.characteristics.append(Characteristic(name: row.fields[1], values: values))
            default:
                problem("unknown row kind \(row.fields.first ?? "")")
            }
        }
        result.problems += duplicates(result)
        return result
    }

    struct RowFailure: Error {
        let message: String
    }

    /// quantity | name | HealthKit identifier | unit | family | aggregation | writable | bounds | HAE names | value set
    static func parseType(_ fields: [String], valueSets: [String: [CategoryValue]]) -> Result<HealthType, RowFailure> {
        func fail(_ message: String) -> Result<HealthType, RowFailure> { .failure(RowFailure(message: message)) }
        guard fields.count == 10 else { return fail("a type row has 10 fields, not \(fields.count)") }
        guard let kind = HealthTypeKind(rawValue: fields[0]) else { return fail("bad kind \(fields[0])") }
        let name = fields[1]
        guard isValidName(name) else { return fail("bad name \(name)") }
        let identifier = fields[2]
        let prefix = kind == .quantity ? HealthTypes.quantityPrefix : HealthTypes.categoryPrefix
        guard identifier.hasPrefix(prefix), identifier.count > prefix.count else {
            return fail("\(name): identifier \(identifier) must start with \(prefix)")
        }
        guard let aggregation = Aggregation(rawValue: fields[5]) else {
            return fail("\(name): aggregation is cumulative or discrete")
        }
        guard fields[6] == "yes" || fields[6] == "no" else { return fail("\(name): writable is yes or no") }
        let writable = fields[6] == "yes"
        var haeNames: [String] = []
        if fields[8] != "-" {
            haeNames = fields[8].split(separator: ",").map { HealthUnitTable.trimmed(String($0)) }
            if let bad = haeNames.first(where: { !isValidName($0) }) { return fail("\(name): bad HAE name \(bad)") }
        }

        switch kind {
        case .quantity:
            let unit = fields[3]
            guard let family = UnitFamily(rawValue: fields[4]) else { return fail("\(name): unknown family \(fields[4])") }
            guard Units.family(of: unit) == family else { return fail("\(name): unit \(unit) is not of family \(family)") }
            guard Units.normalize(unit) == unit else {
                return fail("\(name): write unit \(unit) as \(Units.normalize(unit))")
            }
            var bounds: ClosedRange<Double>?
            if fields[7] != "-" {
                guard let range = parseBounds(fields[7]) else { return fail("\(name): bounds are lo...hi") }
                bounds = range
            }
            guard fields[9] == "-" else { return fail("\(name): a quantity has no value set") }
            return .success(
                HealthType(
                    name: name, hkIdentifier: identifier, kind: kind, unit: unit, family: family,
                    aggregation: aggregation, haeNames: haeNames, writable: writable,
                    bounds: bounds, categoryValues: []))
        case .category:
            guard fields[3] == "-", fields[4] == "-", fields[7] == "-" else {
                return fail("\(name): a category has no unit, family or bounds")
            }
            guard let values = valueSets[fields[9]] else { return fail("\(name): unknown value set \(fields[9])") }
            return .success(
                HealthType(
                    name: name, hkIdentifier: identifier, kind: kind, unit: nil, family: nil,
                    aggregation: aggregation, haeNames: haeNames, writable: writable,
                    bounds: nil, categoryValues: values))
        }
    }

    /// "0.5...700" → 0.5...700; nil unless both ends are finite numbers and lo <= hi.
    static func parseBounds(_ text: String) -> ClosedRange<Double>? {
        let characters = Array(text)
        var index = 0
        while index + 2 < characters.count {
            if characters[index] == ".", characters[index + 1] == ".", characters[index + 2] == "." { break }
            index += 1
        }
        guard index + 2 < characters.count,
            let low = Double(String(characters[..<index])),
            let high = Double(String(characters[(index + 3)...])),
            low.isFinite, high.isFinite, low <= high
        else { return nil }
        return low...high
    }

    /// Value names are snake_case, or short symbols such as `a+` for blood types (aliases only).
    static func isValidValueName(_ name: String) -> Bool {
        isValidName(name) || (name.count == 1 && name.unicodeScalars.allSatisfy { $0.value >= 97 && $0.value <= 122 })
    }

    static func duplicates(_ contents: HealthRegistryContents) -> [String] {
        var problems: [String] = []
        func check<Key: Hashable>(_ what: String, _ keys: [Key]) {
            var seen: Set<Key> = []
            for key in keys where !seen.insert(key).inserted { problems.append("duplicate \(what) \(key)") }
        }
        check("type name", contents.types.map(\.name))
        check("HealthKit identifier", contents.types.map(\.hkIdentifier))
        check("HAE name", contents.types.flatMap(\.haeNames))
        check("workout name", contents.workouts.map(\.name))
        check("workout raw value", contents.workouts.map(\.rawValue))
        check("workout HAE name", contents.workouts.map { HealthNameStyle.displayKey($0.haeName) })
        check("characteristic", contents.characteristics.map(\.name))
        return problems
    }
}
