-- Sessions: a visitor's events with no gap longer than var('session_gap_minutes') between them.
with ordered as (
    select
        visitor_id,
        event_id,
        event_at,
        lag(event_at) over (partition by visitor_id order by event_at, event_id) as previous_at
    from {{ ref('events') }}
),

marked as (
    select
        *,
        case
            when previous_at is null then 1
            when {{ dbt.datediff('previous_at', 'event_at', 'minute') }} >= {{ var('session_gap_minutes') }} then 1
            else 0
        end as is_new_session
    from ordered
),

numbered as (
    select
        *,
        sum(is_new_session) over (
            partition by visitor_id order by event_at, event_id rows between unbounded preceding and current row
        ) as session_number
    from marked
)

select
    visitor_id || '-' || cast(session_number as string) as session_id,
    visitor_id,
    session_number,
    min(event_at) as started_at,
    max(event_at) as ended_at,
    count(*) as events
from numbered
group by visitor_id, session_number
