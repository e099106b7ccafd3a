-- The funnel Product Viewed -> Order Completed: visitors who viewed a product, and those of them
-- who completed an order after their first product view.
with viewed as (
    select visitor_id, min(event_at) as first_viewed_at
    from {{ ref('events') }}
    where event = 'product_viewed'
    group by visitor_id
),

ordered as (
    select distinct v.visitor_id
    from viewed as v
    inner join {{ ref('events') }} as e
        on e.visitor_id = v.visitor_id and e.event = 'order_completed' and e.event_at >= v.first_viewed_at
)

select 1 as step, 'product_viewed' as event, count(*) as visitors from viewed
union all
select 2 as step, 'order_completed' as event, count(*) as visitors from ordered
