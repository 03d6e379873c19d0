// Network namespaces, veth pairs and a bridge, through iproute2.
#include "pod_network.h"

#include <arpa/inet.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <optional>
#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/log.h"
#include "easyscale/common/subprocess.h"

namespace easyscale::op::testing {
namespace {

constexpr size_t kMaxPods = 64;
constexpr std::chrono::seconds kCommandLimit(10);

// Runs `ip args...` and returns its stdout.
StatusOr<std::string> IpOutput(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  ES_ASSIGN_OR_RETURN(
      CommandResult r,
      RunCommand({.argv = argv, .stdoutTo = Output::Pipe(), .stderrTo = Output::Pipe()},
                 kCommandLimit));
  if (r.exitCode != 0) {
    return absl::InternalError(
        absl::StrCat(absl::StrJoin(argv, " "), ": ", absl::StripTrailingAsciiWhitespace(r.err)));
  }
  return r.out;
}

Status Ip(const std::vector<std::string>& args) { return IpOutput(args).status(); }

// For cleanup, which has nobody to return an error to.
void IpOrWarn(const std::vector<std::string>& args) {
  if (Status s = Ip(args); !s.ok()) {
    LogWarn("pod-network", "cleanup step failed", {{"error", std::string(s.message())}});
  }
}

std::string NetnsPrefix(pid_t pid) { return absl::StrCat("easyscale-", pid, "-"); }

// First words of `ip netns list` ("name (id: 3)").
std::vector<std::string> NetnsNames() {
  std::vector<std::string> names;
  const StatusOr<std::string> out = IpOutput({"netns", "list"});
  for (absl::string_view line : absl::StrSplit(out.value_or(""), '\n', absl::SkipEmpty())) {
    names.emplace_back(line.substr(0, line.find(' ')));
  }
  return names;
}

// Link names of the root namespace, from `ip -o link show` ("5: es12h0@if3: <...").
std::vector<std::string> RootLinks() {
  std::vector<std::string> names;
  const StatusOr<std::string> out = IpOutput({"-o", "link", "show"});
  for (absl::string_view line : absl::StrSplit(out.value_or(""), '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() < 2) continue;
    absl::string_view name = words[1];
    names.emplace_back(name.substr(0, std::min(name.find('@'), name.find(':'))));
  }
  return names;
}

// The pid in the name of something a test process made; 0 for other names.
pid_t OwnerOf(const std::string& name) {
  static const std::regex kNetns(R"(easyscale-(\d+)-.+)");
  static const std::regex kLink(R"(es(\d+)h\d+)");
  std::smatch m;
  if (std::regex_match(name, m, kNetns) || std::regex_match(name, m, kLink)) {
    return static_cast<pid_t>(std::stol(m[1]));
  }
  return 0;
}

// Removes what test processes that are gone left behind: their pods'
// processes, namespaces and links. Before this process makes anything of its
// own, names with its own pid are left from a dead process that had it.
void RemoveLeftovers(bool firstInProcess) {
  const auto stale = [firstInProcess](const std::string& name) {
    const pid_t owner = OwnerOf(name);
    if (owner <= 0) return false;
    if (owner == getpid()) return firstInProcess;
    return ::kill(owner, 0) != 0 && errno == ESRCH;
  };
  const std::vector<std::string> namespaces = NetnsNames();
  for (const std::string& ns : namespaces) {
    if (!stale(ns)) continue;
    const StatusOr<std::string> pids = IpOutput({"netns", "pids", ns});
    for (absl::string_view p : absl::StrSplit(pids.value_or(""), '\n', absl::SkipEmpty())) {
      if (int pid = 0; absl::SimpleAtoi(p, &pid) && pid > 0) ::kill(pid, SIGKILL);
    }
  }
  for (const std::string& link : RootLinks()) {
    if (stale(link)) IpOrWarn({"link", "delete", link});
  }
  for (const std::string& ns : namespaces) {
    if (stale(ns)) IpOrWarn({"netns", "delete", ns});
  }
}

struct Prefix {
  uint32_t address = 0;
  int length = 32;
};

// "a.b.c.d" or "a.b.c.d/len".
std::optional<Prefix> ParsePrefix(absl::string_view text) {
  const size_t slash = text.find('/');
  const std::string address(text.substr(0, slash));
  in_addr a{};
  if (::inet_pton(AF_INET, address.c_str(), &a) != 1) return std::nullopt;
  Prefix p{ntohl(a.s_addr), 32};
  if (slash != absl::string_view::npos &&
      (!absl::SimpleAtoi(text.substr(slash + 1), &p.length) || p.length < 0 || p.length > 32)) {
    return std::nullopt;
  }
  return p;
}

bool Overlap(const Prefix& a, const Prefix& b) {
  const int length = std::min(a.length, b.length);
  const uint32_t mask = length == 0 ? 0 : ~uint32_t{0} << (32 - length);
  return (a.address & mask) == (b.address & mask);
}

// What the root namespace routes (but the default route) and its addresses.
StatusOr<std::vector<Prefix>> HostPrefixes() {
  std::vector<Prefix> out;
  ES_ASSIGN_OR_RETURN(const std::string routes, IpOutput({"-4", "route", "show", "table", "all"}));
  for (absl::string_view line : absl::StrSplit(routes, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    // "10.0.0.0/8 dev ...", or a type first: "local 127.0.0.1 dev lo table local ..."
    for (size_t i = 0; i < std::min<size_t>(words.size(), 2); ++i) {
      if (std::optional<Prefix> p = ParsePrefix(words[i])) {
        out.push_back(*p);
        break;
      }
    }
  }
  ES_ASSIGN_OR_RETURN(const std::string addresses, IpOutput({"-4", "-o", "addr", "show"}));
  for (absl::string_view line : absl::StrSplit(addresses, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      if (words[i] != "inet") continue;
      if (std::optional<Prefix> p = ParsePrefix(words[i + 1])) out.push_back(*p);
    }
  }
  return out;
}

// A /24 in 10/8 that the host does not use: "10.X.Y.". Derived from the pid
// and the cluster, so that test processes side by side start apart.
StatusOr<std::string> PickSubnet(int cluster) {
  ES_ASSIGN_OR_RETURN(const std::vector<Prefix> used, HostPrefixes());
  const uint32_t seed = static_cast<uint32_t>(getpid()) * 8 + static_cast<uint32_t>(cluster % 8);
  for (uint32_t i = 0; i < 4096; ++i) {
    const uint32_t xy = (seed + i) & 0xffff;
    const Prefix candidate{(10u << 24) | (xy << 8), 24};
    if (std::none_of(used.begin(), used.end(),
                     [&](const Prefix& p) { return Overlap(p, candidate); })) {
      return absl::StrCat("10.", xy >> 8, ".", xy & 0xff, ".");
    }
  }
  return absl::ResourceExhaustedError("no free /24 in 10.0.0.0/8 for a pod network");
}

}  // namespace

StatusOr<std::unique_ptr<PodNetwork>> PodNetwork::Create() {
  if (::geteuid() != 0) {
    return absl::FailedPreconditionError(
        "the pod network needs root (network namespaces, veth pairs, a bridge)");
  }
  if (Status s = Ip({"-V"}); !s.ok()) {
    return absl::FailedPreconditionError("the pod network needs iproute2's ip: " +
                                         std::string(s.message()));
  }
  static std::mutex mu;  // clusters made at once in one process take turns here
  std::lock_guard<std::mutex> lock(mu);
  static int clusters = 0;
  RemoveLeftovers(clusters == 0);
  std::unique_ptr<PodNetwork> net(new PodNetwork(clusters++));
  ES_RETURN_IF_ERROR(net->SetUp());
  return net;
}

PodNetwork::PodNetwork(int cluster)
    : cluster_(cluster),
      bridgeNs_(absl::StrCat(NetnsPrefix(getpid()), cluster, "-net")),
      hostLink_(absl::StrCat("es", getpid(), "h", cluster)) {}

Status PodNetwork::SetUp() {
  ES_RETURN_IF_ERROR(Ip({"netns", "add", bridgeNs_}));
  ES_RETURN_IF_ERROR(Ip({"-n", bridgeNs_, "link", "add", "br0", "type", "bridge"}));
  ES_RETURN_IF_ERROR(Ip({"-n", bridgeNs_, "link", "set", "br0", "up"}));
  // Bridged frames skip iptables in the bridge's namespace too (per namespace
  // since Linux 5.3; where the switch is not there, this namespace has no rules).
  ES_RETURN_IF_ERROR(Ip({"netns", "exec", bridgeNs_, "sh", "-c",
                         "f=/proc/sys/net/bridge/bridge-nf-call-iptables; "
                         "if [ -e $f ]; then echo 0 > $f; fi"}));
  ES_RETURN_IF_ERROR(
      Ip({"link", "add", hostLink_, "type", "veth", "peer", "name", "host0", "netns", bridgeNs_}));
  ES_RETURN_IF_ERROR(Ip({"-n", bridgeNs_, "link", "set", "host0", "master", "br0", "up"}));
  ES_ASSIGN_OR_RETURN(prefix_, PickSubnet(cluster_));
  hostAddress_ = prefix_ + "1";
  ES_RETURN_IF_ERROR(Ip({"addr", "add", hostAddress_ + "/24", "dev", hostLink_}));
  return Ip({"link", "set", hostLink_, "up"});
}

PodNetwork::~PodNetwork() {
  while (!pods_.empty()) RemovePod(pods_.begin()->first);
  IpOrWarn({"link", "delete", hostLink_});  // and its peer: at once, not when the namespace goes
  IpOrWarn({"netns", "delete", bridgeNs_});
}

StatusOr<PodNetwork::Pod> PodNetwork::AddPod(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = pods_.find(key); it != pods_.end()) {
    return Pod{prefix_ + std::to_string(it->second.octet), "/run/netns/" + it->second.netns};
  }
  if (pods_.size() >= kMaxPods) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the pod network holds at most ", kMaxPods, " pods at once"));
  }
  PodSlot slot{.index = nextPod_++};
  for (slot.octet = 2;; ++slot.octet) {
    if (std::none_of(pods_.begin(), pods_.end(),
                     [&](const auto& p) { return p.second.octet == slot.octet; })) {
      break;
    }
  }
  slot.netns = absl::StrCat(NetnsPrefix(getpid()), cluster_, "-pod-", slot.index);
  const std::string veth = absl::StrCat("p", slot.index);
  const std::string ip = prefix_ + std::to_string(slot.octet);
  const Status made = [&]() -> Status {
    ES_RETURN_IF_ERROR(Ip({"netns", "add", slot.netns}));
    ES_RETURN_IF_ERROR(Ip({"-n", bridgeNs_, "link", "add", veth, "type", "veth", "peer", "name",
                           "eth0", "netns", slot.netns}));
    ES_RETURN_IF_ERROR(Ip({"-n", bridgeNs_, "link", "set", veth, "master", "br0", "up"}));
    ES_RETURN_IF_ERROR(Ip({"-n", slot.netns, "addr", "add", ip + "/24", "dev", "eth0"}));
    ES_RETURN_IF_ERROR(Ip({"-n", slot.netns, "link", "set", "eth0", "up"}));
    ES_RETURN_IF_ERROR(Ip({"-n", slot.netns, "link", "set", "lo", "up"}));
    return Ip({"-n", slot.netns, "route", "add", "default", "via", hostAddress_});
  }();
  if (!made.ok()) {  // undo what was made; some steps find nothing to undo
    (void)Ip({"-n", bridgeNs_, "link", "delete", veth});
    (void)Ip({"netns", "delete", slot.netns});
    return made;
  }
  pods_[key] = slot;
  return Pod{ip, "/run/netns/" + slot.netns};
}

std::optional<PodNetwork::Pod> PodNetwork::FindPod(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pods_.find(key);
  if (it == pods_.end()) return std::nullopt;
  return Pod{prefix_ + std::to_string(it->second.octet), "/run/netns/" + it->second.netns};
}

void PodNetwork::RemovePod(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pods_.find(key);
  if (it == pods_.end()) return;
  // Deleting one end of the pair removes both at once; the namespace goes later.
  IpOrWarn({"-n", bridgeNs_, "link", "delete", absl::StrCat("p", it->second.index)});
  IpOrWarn({"netns", "delete", it->second.netns});
  pods_.erase(it);
}

std::vector<std::string> PodNetwork::ResourcesOf(pid_t pid) {
  std::vector<std::string> out;
  for (std::vector<std::string> names : {NetnsNames(), RootLinks()}) {
    for (const std::string& name : names) {
      if (OwnerOf(name) == pid) out.push_back(name);
    }
  }
  return out;
}

}  // namespace easyscale::op::testing
