#!/usr/bin/env bash
# Assembles an Apache Kafka broker from Maven Central, for the Kafka peer of
# the benchmarks (bench/kafka.go): the broker's jars and their dependencies
# are copied by Maven into $KAFKA_HOME/libs, and the broker then runs as
#
#	java -cp "$KAFKA_HOME/libs/*" kafka.Kafka server.properties
#
# (KRaft combined mode; the benchmark writes server.properties and formats
# the storage itself). No distribution tarball is downloaded: only Maven
# Central is used. Idempotent: does nothing when the libs are present.
#
# Usage: scripts/install-kafka.sh
# Env:   KAFKA_VERSION overrides the pinned version (keep it equal to
#        bench.KafkaVersion unless you are testing an upgrade).
#        KAFKA_HOME overrides the install dir
#        (default ~/.cache/mink/kafka-$KAFKA_VERSION).
# Needs: a JDK (17 or later: Kafka 4 brokers need Java 17) and mvn.
set -euo pipefail

version="${KAFKA_VERSION:-4.1.1}"
home="${KAFKA_HOME:-$HOME/.cache/mink/kafka-$version}"
libs="$home/libs"

if [[ -f "$home/.complete" ]] && compgen -G "$libs/kafka_2.13-$version.jar" >/dev/null; then
	echo "Kafka $version already installed: $home"
	exit 0
fi

for tool in java mvn; do
	if ! command -v "$tool" >/dev/null; then
		echo "install-kafka: $tool is not installed (Debian: apt-get install -y openjdk-17-jdk-headless maven)" >&2
		exit 1
	fi
done

echo "assembling Kafka $version from Maven Central into $home"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# kafka_2.13 is the broker (kafka.Kafka and kafka.tools.StorageTool, the
# Scala core); kafka-server and kafka-storage are named too so that a
# version which moves a class between them still has it. Kafka logs
# through slf4j 1.7; log4j-slf4j-impl and log4j-core are the backend its
# distribution ships (without one the broker logs nothing, which hides
# start-up errors).
cat >"$work/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.mink.bench</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-server</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-storage</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.24.3</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>2.24.3</version></dependency>
  </dependencies>
</project>
EOF
rm -rf "$libs"
mkdir -p "$libs"
mvn -B -q -f "$work/pom.xml" dependency:copy-dependencies \
	-DoutputDirectory="$libs" -DincludeScope=runtime
if ! compgen -G "$libs/kafka_2.13-$version.jar" >/dev/null; then
	echo "install-kafka: kafka_2.13-$version.jar missing from $libs after mvn" >&2
	exit 1
fi
# A quiet log4j2 configuration (XML: it needs no parser beyond the JDK):
# warnings and errors to stderr, and the broker's start-up lines.
cat >"$home/log4j2.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="STDERR" target="SYSTEM_ERR">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Logger name="kafka.server.KafkaRaftServer" level="INFO"/>
    <Logger name="kafka.server.BrokerServer" level="INFO"/>
    <Root level="WARN"><AppenderRef ref="STDERR"/></Root>
  </Loggers>
</Configuration>
EOF
echo "$version" >"$home/.complete"
echo "installed Kafka $version: $(ls "$libs" | wc -l) jars in $libs"
