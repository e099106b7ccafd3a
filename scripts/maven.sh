# Sourced by scripts/ensure-*.sh: the one place that knows how the project calls Maven.
#
#   source scripts/maven.sh
#   maven_command WORK_DIR NAME      # fills the array `maven` (mvn with its options)
#
# Maven (mvn, else Debian's `maven` package) resolves artifacts with the machine's own Maven settings
# (~/.m2/settings.xml: mirrors, proxies, credentials) into its local repository (~/.m2/repository).
# EVENTLAKE_MAVEN_MIRROR=https://repo.example.com/maven2 sends every request to that repository
# instead (a mirror of Maven Central: Nexus, Artifactory); its settings file goes into WORK_DIR.

maven_command() {
  local work="$1" name="$2"
  if ! command -v mvn >/dev/null 2>&1; then
    "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" --for "$name" --missing Maven --no-recommends \
      --otherwise "$name needs Maven (mvn); install it and put it on PATH." \
      maven
  fi
  maven=(mvn --batch-mode --quiet -Dstyle.color=never)
  if [ -n "${EVENTLAKE_MAVEN_MIRROR:-}" ]; then
    cat >"$work/settings.xml" <<SETTINGS
<settings><mirrors><mirror><id>eventlake-mirror</id><mirrorOf>*</mirrorOf>
<url>${EVENTLAKE_MAVEN_MIRROR}</url></mirror></mirrors></settings>
SETTINGS
    maven+=(--settings "$work/settings.xml")
  fi
}
