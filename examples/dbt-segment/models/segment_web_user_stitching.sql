{#-
  dbt-labs/segment's own segment_web_user_stitching (disabled in dbt_project.yml), in SQL both engines
  parse. It takes each anonymous id's last user id with `last_value(user_id ignore nulls) over (...)`,
  which Spark refuses ("[PARSE_SYNTAX_ERROR] Syntax error at or near 'ignore'": Spark wants IGNORE NULLS
  after the parentheses, and DuckDB within). This is the package's own variant for Postgres, which has
  no IGNORE NULLS: ordering a user id that is there after one that is not gives the same answer.
-#}
{{ config(materialized='table') }}

with events as (

    select * from {{ ref('segment_web_page_views') }}

),

mapping as (

    select distinct

        anonymous_id,

        last_value(user_id) over (
            partition by anonymous_id
            order by case when user_id is not null then 1 else 0 end asc, tstamp
            rows between unbounded preceding and unbounded following
        ) as user_id,

        min(tstamp) over (partition by anonymous_id) as first_seen_at,

        max(tstamp) over (partition by anonymous_id) as last_seen_at

    from events

)

select * from mapping
