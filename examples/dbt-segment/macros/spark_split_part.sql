{#-
  dbt-spark's split_part splits with a regular expression and escapes a delimiter that holds a character
  other than a letter or digit anywhere in it, as if it started with one: dbt_utils.get_url_parameter's
  'gclid=' becomes the pattern '\gclid=', and dbt-labs/segment's page views fail with
  "java.util.regex.PatternSyntaxException: Illegal/unsupported escape sequence near index 1".
  (The escaping was meant for a delimiter that *starts* with such a character: dbt-labs/spark-utils#8.)
  Spark 3.3 and later have split_part itself, which takes the delimiter as text and, like DuckDB's,
  answers '' for a part that is not there, where dbt-spark's indexes past the array's end (an error
  in ANSI mode, Spark 4's default: dbt-labs/dbt-adapters#469). This uses it, as dbt does elsewhere.
-#}
{% macro spark__split_part(string_text, delimiter_text, part_number) -%}
  {{ return(dbt.default__split_part(string_text, delimiter_text, part_number)) }}
{%- endmacro %}
