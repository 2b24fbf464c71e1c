#pragma once
// `sightline ranks`: the ranks of one job analysed together (docs/multi-rank.md).
#include <string>
#include <vector>

namespace sightline {

// `inputs`: trace files, or one directory whose .json, .json.gz, .slcap and .db files are the ranks.
// The per-rank table and the job verdict as text or JSON.
// With `merged` set, also writes every rank on one timeline into that trace database.
std::string ranksReport(const std::vector<std::string>& inputs, const std::string& format, const std::string& merged = {});

} // namespace sightline
