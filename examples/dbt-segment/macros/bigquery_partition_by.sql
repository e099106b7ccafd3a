{#-
  dbt-labs/segment's incremental models (segment_web_page_views__sessionized, segment_web_sessions,
  ...) set BigQuery's partition_by, a mapping ({'field': 'tstamp', 'data_type': 'timestamp', ...}).
  dbt-duckdb and dbt-spark read partition_by too, and refuse a mapping: "partitioned_by/partition_by
  must be a list of strings or a string" (dbt-duckdb), "Invalid value ... expected one of list, str"
  (dbt-spark). These overrides (a root project's macros win over an adapter's) read a mapping as no
  partitioning, and otherwise do what the adapter does.
-#}

{% macro duckdb__get_partitioned_by(relation, temporary) -%}
  {%- if config.get('partition_by') is mapping and config.get('partitioned_by') is none -%}
    {{ return(none) }}
  {%- endif -%}
  {{ return(dbt.duckdb__get_partitioned_by(relation, temporary)) }}
{%- endmacro %}

{% macro spark__partition_cols(label, required=false) -%}
  {%- if config.get('partition_by') is mapping -%}
    {{ return('') }}
  {%- endif -%}
  {{ return(dbt.spark__partition_cols(label, required)) }}
{%- endmacro %}
